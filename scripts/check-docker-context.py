#!/usr/bin/env python3
"""Builds the module from exactly the files docker/Dockerfile copies.

No Docker engine is needed: the script reads the Dockerfile's COPY lines,
applies .dockerignore as `docker build` does, copies those files into
target/docker-context (a fixed place, with their modification times, so a
second run finds cargo's work fresh), and runs the Dockerfile's own
`cargo build` line there with a target dir of its own, target/docker-build.
Not the repository's target/: cargo names a workspace's path packages by
their place in the workspace, so the copy's `librl` would share the
checkout's fingerprints and artifacts, and a later `make build` could find
the checkout "fresh" against the copy's files and keep a stale librl.so. A workspace member, a source
file or a config file the image lacks fails here, in `make test`, instead
of in a user's `docker build`.

Usage: python3 scripts/check-docker-context.py [--list]
  --list  print the context's files and stop (no build)
"""

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
CONTEXT = ROOT / "target" / "docker-context"


class Failure(Exception):
    """A problem with the Dockerfile or its context, reported in one line."""


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.split("\n"):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            word, _, rest = whole.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def copy_args(rest: str) -> tuple[list[str], list[str]]:
    """A COPY's flags and its paths (sources then destination)."""
    flags = []
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.strip()
    paths = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
    if len(paths) < 2:
        raise Failure(f"COPY {rest}: needs a source and a destination")
    return flags, paths


def ignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (is_exception, regex), in file order."""
    path = ROOT / ".dockerignore"
    patterns: list[tuple[bool, re.Pattern[str]]] = []
    if not path.exists():
        return patterns
    for raw in path.read_text(encoding="utf-8").split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        line = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        patterns.append((exception, re.compile(to_regex(line))))
    return patterns


def to_regex(pattern: str) -> str:
    """Docker's pattern syntax (Go's filepath.Match plus `**`) as a regex."""
    out, i = "^", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i >= len(pattern) else "(.*/)?"
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.find("]", i)
            if end < 0:
                raise Failure(f".dockerignore: unclosed [ in {pattern!r}")
            out += "[" + pattern[i + 1 : end].replace("!", "^", 1) + "]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return out + "$"


def ignored(rel: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether `docker build` leaves rel out: the last matching pattern
    decides, and a pattern that matches a parent directory matches too."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for exception, regex in patterns:
        if any(regex.match(p) for p in prefixes):
            verdict = not exception
    return verdict


def context_files() -> list[str]:
    """Every file of the build context, relative to the repository."""
    patterns = ignore_patterns()
    has_exceptions = any(exception for exception, _ in patterns)
    files = []
    for here, dirs, names in os.walk(ROOT):
        rel_here = os.path.relpath(here, ROOT)
        rel_here = "" if rel_here == "." else rel_here + "/"
        # An excluded directory is skipped whole unless an exception could
        # bring something inside it back (then its files are judged one by one).
        dirs[:] = sorted(
            d for d in dirs if has_exceptions or not ignored(rel_here + d, patterns)
        )
        for name in sorted(names):
            rel = rel_here + name
            if not ignored(rel, patterns):
                files.append(rel)
    return files


def build_stage(steps: list[tuple[str, str]]) -> tuple[str, list[list[str]], str]:
    """The stage that runs `cargo build`: its WORKDIR, COPY lines and command."""
    workdir = "/"
    stage_copies: list[list[str]] = []
    for word, rest in steps:
        if word == "FROM":
            workdir, stage_copies = "/", []
        elif word == "WORKDIR":
            workdir = os.path.join(workdir, rest)
        elif word in ("COPY", "ADD"):
            flags, paths = copy_args(rest)
            if not any(f.startswith("--from") for f in flags):
                stage_copies.append(paths)
        elif word == "RUN" and "cargo build" in rest:
            command = rest[rest.index("cargo build") :].split("&&")[0].strip()
            return workdir, stage_copies, command
    raise Failure("docker/Dockerfile: no RUN line with `cargo build`")


def materialise(workdir: str, copies: list[list[str]], files: list[str]) -> None:
    """Copies each COPY line's sources from the context to CONTEXT, which
    stands for the build stage's WORKDIR."""
    if CONTEXT.exists():
        shutil.rmtree(CONTEXT)
    CONTEXT.mkdir(parents=True)
    for paths in copies:
        *sources, dest = paths
        dest_abs = os.path.normpath(os.path.join(workdir, dest))
        if os.path.relpath(dest_abs, workdir).startswith(".."):
            raise Failure(
                f"COPY {' '.join(paths)}: the destination is outside WORKDIR {workdir}"
            )
        target = CONTEXT / os.path.relpath(dest_abs, workdir)
        into_dir = dest.endswith("/") or dest in (".", "./") or len(sources) > 1
        for source in sources:
            src = os.path.normpath(source).lstrip("/")
            src = "" if src == "." else src
            matched = [
                f
                for f in files
                if src == ""
                or f == src
                or f.startswith(src + "/")
                or fnmatch.fnmatchcase(f, src)
            ]
            if not matched:
                raise Failure(
                    f"COPY {source}: not in the build context (missing, or left out by .dockerignore)"
                )
            for f in matched:
                if f == src and not (into_dir or (ROOT / src).is_dir()):
                    out = target  # a single file to a file name
                elif f == src or fnmatch.fnmatchcase(f, src):
                    out = target / Path(f).name
                else:
                    out = target / (
                        f[len(src) + 1 :] if src else f
                    )  # a directory's contents
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, out)


def final_stage_sources(steps: list[tuple[str, str]], files: list[str]) -> None:
    """The context files later stages copy (the config) must exist too."""
    for word, rest in steps:
        if word in ("COPY", "ADD"):
            flags, paths = copy_args(rest)
            if any(f.startswith("--from") for f in flags):
                continue
            for source in paths[:-1]:
                src = os.path.normpath(source).lstrip("/")
                if src != "." and not any(
                    f == src or f.startswith(src + "/") for f in files
                ):
                    raise Failure(
                        f"COPY {source}: not in the build context (missing, or left out by .dockerignore)"
                    )


def main() -> int:
    started = time.monotonic()
    try:
        steps = instructions(DOCKERFILE.read_text(encoding="utf-8"))
        files = context_files()
        if "--list" in sys.argv[1:]:
            print("\n".join(files))
            return 0
        final_stage_sources(steps, files)
        workdir, copies, command = build_stage(steps)
        materialise(workdir, copies, files)
    except Failure as failure:
        print(f"docker context: {failure}")
        print("docker-context: 0 passed, 1 failed")
        return 1
    copied = sum(1 for p in CONTEXT.rglob("*") if p.is_file())
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target" / "docker-build"))
    print(
        f"docker context: {copied} files in {CONTEXT.relative_to(ROOT)}; running {command}",
        flush=True,
    )
    result = subprocess.run(shlex.split(command), cwd=CONTEXT, env=env, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        print(
            f"docker context: `{command}` failed from the files docker/Dockerfile copies ({seconds:.0f} s)"
        )
        print("docker-context: 0 passed, 1 failed")
        return 1
    print(
        f"docker context: the module builds from the files docker/Dockerfile copies ({seconds:.0f} s)"
    )
    print("docker-context: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
