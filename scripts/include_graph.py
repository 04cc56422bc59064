"""Our `#include "..."` graph, read the way our compile lines resolve it.

Shared by scripts/tidy-scope (which files a change reaches) and scripts/check-layers (which
folder may include which), so that both see the same arrows. A quoted include is looked up next
to the including file first, then from the repository root (every target adds the root to its
include path); a header that CMake generates from a tracked `.in` file stands for that file. A
name found in neither place is a system or third-party header and is not an arrow of ours.
Paths are relative to the repository root, which must be the working directory.
"""

import os
import re
import sys

INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"')


def resolve(includer: str, name: str, known: set[str]) -> str | None:
    for candidate in (os.path.normpath(os.path.join(os.path.dirname(includer), name)), name):
        for path in (candidate, candidate + ".in"):
            if path in known:
                return path
    return None


def quoted_includes(path: str, tool: str) -> list[tuple[int, str]]:
    """The (line number, name) of each `#include "name"` in the file at path."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
    except OSError as e:
        sys.exit(f"{tool}: cannot read {path}: {e.strerror}")
    found = []
    for number, line in enumerate(lines, start=1):
        if (m := INCLUDE.match(line)) is not None:
            found.append((number, m.group(1).decode("utf-8", "replace")))
    return found


def include_arrows(files: list[str], tool: str) -> dict[str, list[tuple[int, str]]]:
    """For each file, the (line number, file of ours) of every include that resolves to one."""
    known = set(files)
    return {f: [(number, r) for number, name in quoted_includes(f, tool)
                if (r := resolve(f, name, known)) is not None]
            for f in files}


def includes_of(files: list[str], tool: str) -> dict[str, set[str]]:
    """For each file, the files of ours it includes."""
    return {f: {target for _, target in arrows}
            for f, arrows in include_arrows(files, tool).items()}
