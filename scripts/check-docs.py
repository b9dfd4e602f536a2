#!/usr/bin/env python3
"""Checks the documentation's links: README.md and every page under docs/.

Every relative link must name a file or directory of the repository, and
its #anchor, if any, a heading of the Markdown page it names (GitHub's
slugs). Every page under docs/ must be reachable from README.md by
following links. External links (http:, https:, mailto:) are not fetched.
Prints one line per failure and a closing "N passed, M failed".
Stdlib only: `python3 scripts/check-docs.py [repo root]`.
"""

import re
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(
    sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
).resolve()

# [text](target) and ![alt](target), the target up to a space or ")".
LINK = re.compile(
    r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
# [label]: target (reference definitions).
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def strip_code(text: str) -> list[str]:
    """The page's lines with fenced blocks blanked and inline code removed."""
    out, fenced = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            out.append("")
            continue
        out.append("" if fenced else INLINE_CODE.sub("", line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped, spaces to hyphens (hyphens and underscores kept)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path, cache: dict[Path, set[str]]) -> set[str]:
    if page not in cache:
        seen: dict[str, int] = {}
        found = set()
        fenced = None
        for line in page.read_text(encoding="utf-8").split("\n"):
            m = FENCE.match(line)
            if m:
                fenced = (
                    m.group(1)
                    if fenced is None
                    else (None if m.group(1) == fenced else fenced)
                )
                continue
            h = HEADING.match(line) if fenced is None else None
            if h:
                base = slug(h.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[page] = found
    return cache[page]


def links(page: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(strip_code(page.read_text(encoding="utf-8")), 1):
        for m in LINK.finditer(line):
            found.append((number, m.group(1)))
        for m in REFDEF.finditer(line):
            found.append((number, m.group(1)))
    return found


def main() -> int:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    cache: dict[Path, set[str]] = {}
    graph: dict[Path, set[Path]] = {p: set() for p in pages}
    passed, failures = 0, []
    for page in pages:
        for number, target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # http:, https:, mailto: ...
            where = f"{page.relative_to(ROOT)}:{number}: {target}"
            path, _, fragment = target.partition("#")
            dest = (page.parent / unquote(path)).resolve() if path else page
            if not dest.exists():
                failures.append(f"{where}: no such file")
                continue
            if ROOT not in dest.parents and dest != ROOT:
                failures.append(f"{where}: points outside the repository")
                continue
            if (
                fragment
                and dest.suffix == ".md"
                and unquote(fragment) not in anchors(dest, cache)
            ):
                failures.append(
                    f"{where}: no heading with anchor #{fragment} in {dest.relative_to(ROOT)}"
                )
                continue
            passed += 1
            if dest.suffix == ".md" and dest in graph:
                graph[page].add(dest)
    # Every docs/ page must be reachable from the front page.
    reached, todo = {ROOT / "README.md"}, [ROOT / "README.md"]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    for page in pages:
        if page in reached:
            passed += 1
        else:
            failures.append(
                f"{page.relative_to(ROOT)}: not reachable by links from README.md"
            )
    for failure in failures:
        print(failure)
    print(f"docs links: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
