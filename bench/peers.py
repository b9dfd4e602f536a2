"""The modules `make bench` loads beside librl: the floor (bench/floor, ours,
a reference) and redis-cell 0.2.2, the peer, built from its crates.io source.
Nothing of redis-cell is committed: cargo fetches the crate into its
registry, and it is built under target/bench-cell/."""

import json
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
TARGET = os.path.join(ROOT, "target")
FLOOR = os.path.join(TARGET, "release", "librlfloor.so")

CELL_VERSION = "0.2.2"
CELL_DIR = os.path.join(TARGET, "bench-cell")
CELL = os.path.join(CELL_DIR, "target", "release", "libredis_cell.so")


def build_floor():
    """bench/floor in the module's target dir: the same redis-module build
    and release profile as librl's."""
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "--quiet",
         "--manifest-path", os.path.join(BENCH, "Cargo.toml"), "-p", "librl-bench-floor",
         "--target-dir", TARGET],
        check=True,
    )
    return FLOOR


def build_cell(log=print):
    """redis-cell's cdylib, built once. The crate declares crate-type
    "dylib" (a Rust dylib, which would need Rust's libstd at run time), so
    it is built with `cargo rustc --crate-type cdylib`, as its releases are.
    Returns the path, or None (with the reason logged) if it cannot be built."""
    if os.path.exists(CELL):
        return CELL
    try:
        fetch = os.path.join(CELL_DIR, "fetch")
        os.makedirs(os.path.join(fetch, "src"), exist_ok=True)
        # A throwaway manifest that depends on the crate: `cargo fetch`
        # puts its source in cargo's registry, and cargo metadata says where.
        with open(os.path.join(fetch, "Cargo.toml"), "w") as f:
            f.write(
                '[package]\nname = "fetch-redis-cell"\nversion = "0.0.0"\nedition = "2021"\n'
                f'publish = false\n\n[dependencies]\nredis-cell = "={CELL_VERSION}"\n\n[workspace]\n'
            )
        open(os.path.join(fetch, "src", "lib.rs"), "w").close()
        manifest = os.path.join(fetch, "Cargo.toml")
        subprocess.run(["cargo", "fetch", "--quiet", "--manifest-path", manifest], check=True)
        meta = json.loads(subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--manifest-path", manifest],
            check=True, capture_output=True, text=True,
        ).stdout)
        src = next(os.path.dirname(p["manifest_path"]) for p in meta["packages"]
                   if p["name"] == "redis-cell" and p["version"] == CELL_VERSION)
        # Built from a copy, so cargo writes no lock file into its registry;
        # the fetch's lock pins the dependencies it resolved.
        build = os.path.join(CELL_DIR, f"redis-cell-{CELL_VERSION}")
        shutil.rmtree(build, ignore_errors=True)
        shutil.copytree(src, build)
        with open(os.path.join(build, "Cargo.toml"), "a") as f:
            f.write("\n# Not a member of librl's workspace.\n[workspace]\n")
        shutil.copy(os.path.join(fetch, "Cargo.lock"), os.path.join(build, "Cargo.lock"))
        log(f"building redis-cell {CELL_VERSION} (crates.io source) in target/bench-cell")
        subprocess.run(
            ["cargo", "rustc", "--release", "--lib", "--crate-type", "cdylib", "--quiet",
             "--manifest-path", os.path.join(build, "Cargo.toml"),
             "--target-dir", os.path.join(CELL_DIR, "target")],
            check=True, capture_output=True, text=True,
        )
    except (OSError, subprocess.CalledProcessError, StopIteration, ValueError) as e:
        detail = getattr(e, "stderr", "") or ""
        log(f"redis-cell {CELL_VERSION} could not be built, so CL.THROTTLE is left out: {e}\n{detail[-2000:]}")
        return None
    return CELL if os.path.exists(CELL) else None
