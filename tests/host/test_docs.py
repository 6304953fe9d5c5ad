#!/usr/bin/env python3
"""The numbers and lists in README.md that change with the code, checked against their source, so that a
stale one fails here rather than misleads a reader:
- the test tiers' times (README's tier table) against tests/run.sh --estimate and tests/suites.txt;
- the configuration symbols' table against Kconfig: every name in it is a symbol, every symbol a user can
  set is in it;
- every board named in README.md exists in configs/.
Prints one ok / not ok line per check; exits 0."""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
os.chdir(ROOT)
sys.path.insert(0, "tools/make")
import kconfig  # noqa: E402  (re-runs this script under /usr/bin/python3 where kconfiglib is not importable)


def verdict(ok, name, why=""):
    print(f"ok - {name}" if ok else f"not ok - {name}: {why}")


def readme():
    with open(os.environ.get("SNN_README", "README.md")) as f:
        return f.read()


def tier_times(text):
    """The tier table's rows: {tier: (cpu text, gpu text)}."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `make (check|test|test-full)` \|[^|]*\| ([^|]*) \| ([^|]*) \|$", line)
        if m:
            rows[{"check": "check", "test": "test", "test-full": "full"}[m.group(1)]] = (m.group(2).strip(),
                                                                                        m.group(3).strip())
    return rows


def gpu_seconds(tier):
    letter = {"check": "c", "test": "t", "full": "f"}[tier]
    with open("tests/suites.txt") as f:
        for line in f:
            p = line.split()
            if p and not p[0].startswith("#") and p[0] == "gpu" and letter in p[3] and p[2] != "-":
                return int(p[2])
    return 0


def check_tiers(text):
    rows = tier_times(text)
    for tier in ("check", "test", "full"):
        target = "test-full" if tier == "full" else tier
        if tier not in rows:
            verdict(False, f"README's tier table has make {target}", "no row")
            continue
        cpu, gpu = rows[tier]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}  # as a user's shell has it
        est = subprocess.run(["tests/run.sh", "--estimate", tier], capture_output=True, text=True,
                             env={**env, "PATH": "/usr/bin:/bin"}).stdout  # no nvidia-smi: the CPU figure
        want = re.match(r"(about \d+ (?:s|min))", est)
        verdict(want and cpu == want.group(1), f"README's make {target} time is tests/suites.txt's estimate",
                f"README says '{cpu}', the table gives '{est.strip()}'")
        g = gpu_seconds(tier)
        want_gpu = f"about {(g + 30) // 60} min more" if g else "-"
        verdict(gpu.startswith(want_gpu), f"README's make {target} GPU part is tests/suites.txt's",
                f"README says '{gpu}', the table gives '{want_gpu}'")


def kconfig_symbols():
    k = kconfig.kconfiglib.Kconfig("Kconfig", warn=False)
    settable = {s.name for s in k.unique_defined_syms if any(n.prompt for n in s.nodes)}
    settable |= {s.name for c in k.unique_choices for s in c.syms}
    return {s.name for s in k.unique_defined_syms}, settable


def table_names(text, known):
    """The symbol names the README's configuration table mentions: `A_B_C` / `_D` means A_B_D or A_D,
    whichever is a symbol."""
    start = text.index("## Configuration symbols")
    end = text.index("\n## ", start + 1)
    names, wild = set(), []
    for line in text[start:end].splitlines():
        if not line.startswith("| `") and not line.startswith("| "):
            continue
        base = None
        for tok in re.findall(r"`([A-Z_][A-Z0-9_*]*)`", line):
            if tok.startswith("_") and base:
                parts = base.split("_")
                cands = ["_".join(parts[:i]) + tok for i in range(len(parts) - 1, 0, -1)]
                names.add(next((c for c in cands if c in known), cands[0]))
                continue
            if tok.endswith("*"):
                wild.append(tok[:-1])
            elif not tok.startswith("_"):
                names.add(tok)
                base = tok
    return names, wild


def check_symbols(text):
    known, settable = kconfig_symbols()
    names, wild = table_names(text, known)
    unknown = sorted(n for n in names if n not in known and not n.startswith("CONFIG_"))
    unknown += [w + "*" for w in wild if not any(k.startswith(w) for k in known)]
    verdict(not unknown, "every name in README's configuration table is a Kconfig symbol", ", ".join(unknown))
    missing = sorted(s for s in settable if s not in names and not any(s.startswith(w) for w in wild))
    verdict(not missing, f"every settable Kconfig symbol ({len(settable)}) is in README's configuration table",
            ", ".join(missing))


def check_boards(text):
    boards = {f[:-len("_defconfig")] for f in os.listdir("configs") if f.endswith("_defconfig")}
    named = set(re.findall(r"`((?:h100|a100|rtx2060)[a-z0-9_]*)(?:_defconfig)?`", text))
    missing = sorted(b for b in named if b not in boards)
    verdict(not missing, f"every board README.md names ({len(named)}) is in configs/", ", ".join(missing))


if __name__ == "__main__":
    text = readme()
    check_tiers(text)
    check_symbols(text)
    check_boards(text)
