#!/usr/bin/env python3
"""The numbers and lists in README.md and docs/DESIGN.md that change with the code, checked against their
source, so that a stale one fails here rather than misleads a reader:
- the test tiers' times (README's tier table) against tests/run.sh --estimate and tests/suites.txt;
- the configuration symbols' table against Kconfig: every name in it is a symbol, every symbol a user can
  set is in it;
- every board named in README.md or docs/DESIGN.md exists in configs/;
- docs/DESIGN.md: every file path it names (in backticks, or in its indented call chain) exists; every
  CONFIG_ name and every Kconfig symbol it names in backticks is a symbol (or a name tools/make/kconfig.py
  generates); every code name (an identifier with an underscore, or a CamelCase type) it names is in the
  sources; the numbers it keeps equal their source's;
- the names a search for a kernel or a hop must find: every OP(name) prototype of kernels/ops_proto.h has
  host_name and cuda_name in its comment; every function the path from main() at the top of nn/train.c
  names is defined in the file named beside it.
SNN_README and SNN_DESIGN name other copies of the two files (the checks' own tests plant stale ones).
Prints one ok / not ok line per check; exits 0."""
import fnmatch
import glob
import os
import re
import subprocess
import sys

SELF = os.path.abspath(__file__)
ROOT = os.path.join(os.path.dirname(SELF), "..", "..")
os.chdir(ROOT)
sys.path.insert(0, "tools/make")
import kconfig  # noqa: E402  (re-runs this script under /usr/bin/python3 where kconfiglib is not importable)


def verdict(ok, name, why=""):
    print(f"ok - {name}" if ok else f"not ok - {name}: {why}")


def readme():
    with open(os.environ.get("SNN_README", "README.md")) as f:
        return f.read()


def design():
    with open(os.environ.get("SNN_DESIGN", "docs/DESIGN.md")) as f:
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


KCONF = []


def kconf():
    """Kconfig, loaded once, every symbol at its default."""
    if not KCONF:
        KCONF.append(kconfig.kconfiglib.Kconfig("Kconfig", warn=False))
    return KCONF[0]


def kconfig_symbols():
    k = kconf()
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


BOARD = r"(?:h100|a100|rtx2060)[a-z0-9_]*"


def check_boards(text, doc="README.md"):
    boards = {f[:-len("_defconfig")] for f in os.listdir("configs") if f.endswith("_defconfig")}
    named = set(re.findall(rf"`({BOARD})(?:_defconfig)?`", text))
    missing = sorted(b for b in named if b not in boards)
    verdict(not missing, f"every board {doc} names ({len(named)}) is in configs/", ", ".join(missing))


# ---- docs/DESIGN.md ------------------------------------------------------------------------------------

def code_spans(text):
    """What DESIGN.md writes as code: its `spans`, and the words of its indented blocks (the call chain)."""
    spans = [m.group(1) for m in re.finditer(r"`([^`]+)`", text)]
    words = [w for line in text.splitlines() if line.startswith("    ") for w in line.split()]
    return spans, words


SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".txt")


def source_words():
    """Every identifier in the engine's, the tests' and the tools' text (code and comments; not the docs, not
    this script)."""
    words = set()
    files = ["Makefile", "Kconfig"]
    for top in ("app", "arch", "configs", "data", "include", "kernels", "mm", "nn", "tests", "tools"):
        for d, dirs, names in os.walk(top):
            dirs[:] = [x for x in dirs if x not in ("bin", "__pycache__") and not x.startswith("corpus")]
            files += [os.path.join(d, n) for n in names
                      if n.endswith(SOURCE_EXT) or n.startswith(("Kconfig", "Kbuild")) or n == "layers"]
    for f in files:
        if os.path.samefile(f, SELF):
            continue  # this script's own examples name nothing
        with open(f, encoding="utf-8", errors="replace") as fh:
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", fh.read()))
    return words


BUILT = ("app/mnist", "tests/bin/", "tools/bin/")


def path_claim(token):
    """The glob a code span or call-chain word stands for where it names a file of the tree, else None."""
    token = token.rstrip(":,;.")
    if token.startswith(("$", "-")) or "=" in token or "<<<" in token or "->" in token:
        return None  # $(O)/..., an option, an assignment, code
    if not (re.fullmatch(r"[\w.*<>-]+(/[\w.*<>-]*)+", token) or token in ("Makefile", "Kconfig", "Kbuild")
            or re.fullmatch(r"[\w-]+\.(c|h|cu|cuh|py|sh|md|txt)", token)):
        return None
    if token.lstrip("./").startswith(BUILT):
        return None  # programs, built under $(O)
    token = re.sub(r"(?<![A-Za-z])(NAME|BOARD|FILE|DIR|TIER)(?![A-Za-z])", "*", re.sub(r"<[^>]+>", "*", token))
    return token if "/" in token else "**/" + token  # a bare file name: one of that name, anywhere


def check_design_paths(text):
    spans, words = code_spans(text)
    claims = [(t, path_claim(t)) for t in spans + words]
    named = sorted({g for _, g in claims if g})
    missing = [g for g in named if not [f for f in glob.glob(g, recursive=True) if not f.startswith("build/")]]
    verdict(named and not missing, f"every file path docs/DESIGN.md names ({len(named)}) exists",
            "no " + ", ".join(missing))


def generated_names():
    """What tools/make/kconfig.py adds to the generated header beside kconfiglib's symbols."""
    return {f"{d}_{s}" for d in kconfig.DECIMALS for s in ("VALUE", "NONZERO")} | {"DATA_ROOT_ABSOLUTE"}


def is_symbol(name, known):
    """name (without CONFIG_) is a symbol, or a pattern (*) that matches one."""
    return name in known if "*" not in name else any(fnmatch.fnmatchcase(k, name) for k in known)


def check_design_symbols(text):
    known, _ = kconfig_symbols()
    families = {k.split("_")[0] for k in known}
    bad = set()
    for m in re.finditer(r"\bCONFIG_([A-Z0-9_*]*[A-Z0-9*])", text):
        if not is_symbol(m.group(1), known | generated_names()):
            bad.add("CONFIG_" + m.group(1))
    spans, _ = code_spans(text)
    bare = {t for t in spans if re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*(_\*)?", t) and t.split("_")[0] in families}
    # a name of a Kconfig family that a header #defines (CUDA_CHECK) is code, not a symbol
    headers = ""
    for f in sorted(glob.glob("**/*.h", recursive=True)):
        if not f.startswith(("build/", "docs/")):
            with open(f, encoding="utf-8", errors="replace") as fh:
                headers += fh.read()
    defined = {t for t in bare if not is_symbol(t, known) and re.search(rf"#\s*define\s+{t}\b", headers)}
    bad |= {t for t in bare - defined if not is_symbol(t, known)}
    verdict(not bad, f"every Kconfig symbol docs/DESIGN.md names ({len(bare - defined)} in backticks, and its CONFIG_ "
            "names) is a symbol", ", ".join(sorted(bad)))


def code_names(token):
    """The identifiers of a code span worth checking: with an underscore, or CamelCase (GemmEpiUpdate)."""
    if re.search(r"\s", token) or "*" in token or "/" in token or token.startswith("-") or "CONFIG_" in token \
            or re.fullmatch(BOARD, token):
        return []
    return [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", token)
            if ("_" in w.strip("_") or re.fullmatch(r"[A-Z][a-z0-9]+[A-Z]\w*|[a-z]+[A-Z]\w*", w))]


def check_design_names(text, words):
    known, _ = kconfig_symbols()
    families = {k.split("_")[0] for k in known}
    spans, block = code_spans(text)
    names = {n for t in spans + block for n in code_names(t.rstrip(":,;"))  # symbols: check_design_symbols's
             if not (re.fullmatch(r"[A-Z][A-Z0-9_]*", n) and n.split("_")[0] in families)}
    missing = sorted(n for n in names if n not in words)
    verdict(names and not missing, f"every code name docs/DESIGN.md gives ({len(names)}) is in the sources",
            "not found: " + ", ".join(missing))


def source_number(path, pattern):
    with open(path) as f:
        m = re.search(pattern, f.read())
    return m.group(1) if m else None


def kdefault(name):
    """A symbol's default: its only one, or the first whose condition holds in the default configuration
    (where the symbol's own dependency, part of every condition, may not)."""
    defaults = kconf().syms[name].defaults
    if len(defaults) == 1:
        return defaults[0][0].str_value
    for value, cond in defaults:
        if kconfig.kconfiglib.expr_value(cond):
            return value.str_value
    return None


def check_design_numbers(text):
    """Each number DESIGN.md keeps, where it says it, against where the code says it."""
    gain = source_number("tools/make/tune.py", r"\nGAIN = ([0-9.]+)")
    checks = [
        ("the fused step's default width", r"`FUSED_DEFAULT_WIDTH`\s+\(default (\d+)\)",
         kdefault("FUSED_DEFAULT_WIDTH"), "arch/cuda/Kconfig"),
        ("the plain boards' model", r"defaults' model,\s+784-(\d+)-10",
         kdefault("NN_HIDDEN_WIDTH") if kdefault("NN_HIDDEN_LAYERS") == "1" else "not one hidden layer", "nn/Kconfig"),
        ("the plain boards' batch", r"784-\d+-10 at batch (\d+)", kdefault("TRAIN_BATCH_SIZE"), "nn/Kconfig"),
        ("the h100 board's model", r"`h100` board, 784-(\d+)-10", kdefault("NN_HIDDEN_WIDTH"), "nn/Kconfig"),
        ("the cluster kernel's blocks", r"one cluster of (\d+) blocks",
         source_number("kernels/cuda/fused/cluster.cu", r"constexpr int BLOCKS = (\d+);"), "the cluster's BLOCKS"),
        ("the grid-resident kernel's units a block", r"\((\d+) hidden\s+units of every hidden layer",
         source_number("kernels/fused.h", r"#define SNN_GR_UNITS (\d+)"), "SNN_GR_UNITS"),
        ("the arena's alignment", r"(\d+)-byte aligned in one\s+allocation",
         source_number("mm/arena.h", r"#define SNN_ARENA_ALIGN (\d+)"), "SNN_ARENA_ALIGN"),
        ("the collapse check's samples", r"the epoch's last\s+(\d+) samples",
         source_number("app/mnist.c", r"\((\d+) \+ SNN_BATCH - 1\) / SNN_BATCH"), "app/mnist.c"),
        ("the tuner's least gain", r"gain at least (\d+) %", gain and str(round((1 - float(gain)) * 100)),
         "GAIN in tools/make/tune.py"),
    ] + [(f"sm{sm}'s shared memory a block", rf"\| `arch/sm{sm}/` \|[^\n]*?(\d+) KB",
          source_number(f"arch/sm{sm}/limits.h", r"SNN_ARCH_MAX_SMEM_PER_BLOCK \((\d+) \* 1024\)"),
          f"arch/sm{sm}/limits.h") for sm in (75, 80, 90)]
    for what, pattern, want, source in checks:
        found = re.findall(pattern, text)
        verdict(found and all(f == want for f in found), f"docs/DESIGN.md's {what} is {source}'s",
                f"DESIGN.md says {found or 'nothing the check finds'}, {source} {want}")


# ---- the names a reader searches for ----------------------------------------------------------------------

def comment_before(text, pos):
    """The comment just before pos, with at most a return type between them, or ''."""
    end = text.rfind("*/", 0, pos)
    if end < 0 or re.search(r"[;{}]|/\*", text[end + 2:pos]):
        return ""
    return text[text.rfind("/*", 0, end):end]


def check_op_names(proto):
    """The X-macro writes host_##name and cuda_##name, which a search would not find: each prototype's
    comment names them."""
    ops = [(m.group(1), m.start()) for m in re.finditer(r"^(?!\s*/?\*).*?\bOP\((\w+)\)\s*\(", proto, re.M)]
    bad = [name for name, at in ops
           if not all(re.search(rf"\b{p}_{name}\b", comment_before(proto, at)) for p in ("host", "cuda"))]
    verdict(ops and not bad, f"every op of kernels/ops_proto.h ({len(ops)}) names its host_ and cuda_ functions "
            "in its comment", "not named: " + ", ".join(bad))


def defines(path, name):
    """Whether the C or CUDA file at path defines function name: at a line's start (after its type), a
    parameter list, then a body."""
    if not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        src = f.read()
    return re.search(rf"^(?:[A-Za-z_][^;{{}}()\n]*[\s*])?{name}\s*\([^;{{}}]*\)\s*\{{", src, re.M) is not None


def check_chain(train_c):
    """nn/train.c opens with the path from main() to a kernel, a `function (file)` a hop."""
    m = re.match(r"\s*/\*(.*?)\*/", train_c, re.S)
    hops = re.findall(r"\b(\w+) \(([\w./-]+\.(?:c|h|cu|cuh))\)", m.group(1)) if m else []
    opens = hops[:1] == [("main", "app/mnist.c")]
    bad = [f"{name} ({path})" for name, path in hops if not defines(path, name)]
    verdict(opens and not bad, f"every function of nn/train.c's path from main() ({len(hops)}) is defined in the "
            "file it names", "not defined there: " + ", ".join(bad) if opens else "no main (app/mnist.c) opens it")
    layered = re.findall(r"\b(\w+) \(", m.group(1).split("The fused step")[0]) if m else []
    verdict(0 < len(layered) <= 7, "the layered step's path is at most 6 calls from main() to a GEMM's launch",
            f"{len(layered) - 1} calls: " + " -> ".join(layered))


# The developers' rule for commit subjects, kept since the commit that last broke it.
SUBJECTS_SINCE = "d8b96dd"


def check_history():
    log = subprocess.run(["git", "log", "--format=%h %s", f"{SUBJECTS_SINCE}..HEAD"], capture_output=True, text=True)
    if log.returncode:
        print(f"skip - commit subjects: skipped: no git history back to {SUBJECTS_SINCE} (a shallow clone?)")
        return
    long = [line for line in log.stdout.splitlines() if len(line.split(" ", 1)[1]) > 72]
    verdict(not long, f"every commit subject since {SUBJECTS_SINCE} is at most 72 characters",
            "; ".join(long[:3]))


if __name__ == "__main__":
    text = readme()
    check_tiers(text)
    check_symbols(text)
    check_boards(text)
    doc, words = design(), source_words()
    check_boards(doc, "docs/DESIGN.md")
    check_design_paths(doc)
    check_design_symbols(doc)
    check_design_names(doc, words)
    check_design_numbers(doc)
    with open("kernels/ops_proto.h") as f:
        check_op_names(f.read())
    with open("nn/train.c") as f:
        check_chain(f.read())
    check_history()
