#!/usr/bin/env python3
"""The Python tools import one another without a cycle, the libraries in
tools/lib/ import no tool outside it, and no two tools share a module name
(the scripts put several of tools/'s folders on sys.path, where one would
hide the other). Imports are read with ast, inside functions too.

    tests/host/test_tool_imports.py
"""
import ast
import glob
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")


def verdict(ok, name, why=""):
    print(f"ok - tool imports: {name}" if ok else f"not ok - tool imports: {name}: {why}")


def imported(path):
    """The top-level names of the modules a file imports (absolute imports; the tools use no others)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def find_cycle(graph):
    """A list of modules [a, b, ..., a] that import one another in a ring, or None."""
    state = {}  # module -> "open" while its imports are being followed, "done" after

    def visit(m, path):
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                cycle = visit(n, path + [n])
                if cycle:
                    return cycle
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m, [m])
            if cycle:
                return cycle
    return None


def main():
    files = sorted(glob.glob(os.path.join(TOOLS, "**", "*.py"), recursive=True))
    where = {}
    for f in files:
        where.setdefault(os.path.splitext(os.path.basename(f))[0], []).append(os.path.relpath(f, REPO))
    shared = {m: fs for m, fs in where.items() if len(fs) > 1}
    verdict(not shared, f"the {len(files)} Python files under tools/ have names of their own", str(shared))

    modules = {m: fs[0] for m, fs in where.items()}
    graph = {m: imported(os.path.join(REPO, f)) & modules.keys() for m, f in modules.items()}
    edges = sum(len(g) for g in graph.values())
    cycle = find_cycle(graph)
    verdict(edges and not cycle, f"no import cycle among them ({edges} imports of one another)",
            " -> ".join(cycle or []))
    verdict(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"],
            "the cycle check finds a planted cycle", "")

    lib = {m for m, f in modules.items() if f.startswith("tools/lib/")}
    upward = {m: sorted(graph[m] - lib) for m in sorted(lib) if graph[m] - lib}
    verdict(lib and not upward, f"the {len(lib)} libraries in tools/lib/ import only libraries", str(upward))


if __name__ == "__main__":
    main()
