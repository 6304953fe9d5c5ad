#!/usr/bin/env python3
"""Every tools/ path that a tracked file names exists, and tools/README.md has
a line for each file in tools/ and names no other: a moved or renamed tool
leaves no reference behind.

    tests/host/test_tool_paths.py
"""
import glob
import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# a path from the tree's root; what follows a word (mytools/) is not one
TOOLS_PATH = re.compile(r"(?<![\w-])tools/[\w./*-]*")
BUILT = "tools/bin"  # the compiled lab programs, under $(O) (git-ignored), never in the tree
INDEX_LINE = re.compile(r"^- `([^`]+)`: ")


def verdict(ok, name, why=""):
    print(f"ok - tool paths: {name}" if ok else f"not ok - tool paths: {name}: {why}")


def tracked():
    """The files git tracks or would (new ones not yet added; not the ignored build outputs)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.split("\0") if f]


def named_paths(files):
    """{path: first 'file:line' naming it} over the tracked text files."""
    named = {}
    for f in files:
        try:
            with open(os.path.join(REPO, f), encoding="utf-8") as text:
                lines = text.read().splitlines()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # images, symbolic links to directories, a file deleted in the work tree
        for n, line in enumerate(lines, start=1):
            for m in TOOLS_PATH.finditer(line):
                path = m.group(0).rstrip(".")
                if path != BUILT and not path.startswith(BUILT + "/"):
                    named.setdefault(path, f"{f}:{n}")
    return named


def main():
    files = tracked()
    named = named_paths(files)
    missing = [f"{p} ({where})" for p, where in sorted(named.items()) if not glob.glob(os.path.join(REPO, p))]
    verdict(named and not missing, f"the {len(named)} tools/ paths the tracked files name exist",
            "; ".join(missing))

    in_tools = {f[len("tools/"):] for f in files if f.startswith("tools/")} - {"README.md"}
    with open(os.path.join(REPO, "tools", "README.md"), encoding="utf-8") as f:
        indexed = [m.group(1) for m in map(INDEX_LINE.match, f) if m]
    unlisted = sorted(in_tools - set(indexed))
    verdict(not unlisted, f"tools/README.md has a line for each of the {len(in_tools)} files in tools/",
            "no line for " + ", ".join(unlisted))
    stray = sorted(set(indexed) - in_tools)
    twice = sorted({p for p in indexed if indexed.count(p) > 1})
    verdict(not stray and not twice, "tools/README.md names no other file, and each once",
            f"not in tools/: {stray}; twice: {twice}")


if __name__ == "__main__":
    main()
