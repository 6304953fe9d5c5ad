#!/usr/bin/env python3
"""Configured text is data: every string symbol of Kconfig set to hostile text (printf conversions,
quotes, backslashes, shell syntax, non-ASCII, empty; a fixed list and combinations drawn at random)
is either refused with the symbol's name or reaches generated/config.h as exactly that text, checked
by compiling the header and printing each string. Runs tools/make/kconfig.py's own checks and header
writer in one process. Prints one ok / not ok line; exits 0."""
import contextlib
import io
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
os.chdir(ROOT)
sys.path.insert(0, "tools/make")
import kconfig  # noqa: E402  (tools/make/kconfig.py; re-executes under /usr/bin/python3 without kconfiglib)

PIECES = ["%s%s%s%n", "x/%s%s%s%n", "%99999999d%x%p", "%", "%%", 'a"b', "a\\b", "it's", "a b  c", "$(id)",
          "`id`;x", "~/d", "d\u00e9/\u00fc", "\\n", "\\", '"']
ENABLES = {"TRAIN_ADAM": "TRAIN_OPTIMIZER_ADAMW", "TRAIN_LR_GAMMA": "TRAIN_LR_STEP",
           "TRAIN_LR_FINAL": "TRAIN_LR_COSINE", "TRAIN_AFFINE": "TRAIN_AUGMENT_AFFINE",
           "TRAIN_ELASTIC": "TRAIN_AUGMENT_ELASTIC"}


def c_literal_of(header, name):
    for line in header.splitlines():
        if line.startswith(f"#define {name} "):
            return line[len(f"#define {name} "):]
    return None


def main():
    seed = int(os.environ.get("SNN_FUZZ_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    values = [""] + PIECES + ["".join(rng.choice(PIECES) for _ in range(4)) for _ in range(8)]
    kconf = kconfig.load(None)
    kconf.load_config("configs/host_defconfig")
    strings = [s for s in kconf.unique_defined_syms if s.orig_type == kconfig.kconfiglib.STRING]
    problems, checks, printed = [], [], []
    for sym in strings:
        for prefix, enable in ENABLES.items():
            if sym.name.startswith(prefix):
                kconf.syms[enable].set_value(2)
        default = sym.str_value
        for v in values:
            sym.set_value(v)
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    header = kconfig.config_header(kconf, "fuzz")
            except SystemExit:
                if f"CONFIG_{sym.name}" not in err.getvalue():
                    problems.append(f"{sym.name}={v!r} refused without its name: {err.getvalue().strip()}")
                continue
            name = "CONFIG_DATA_ROOT_ABSOLUTE" if sym.name == "DATA_ROOT" else f"CONFIG_{sym.name}"
            want = os.path.join(kconfig.SOURCE_TREE, v) if sym.name == "DATA_ROOT" else v
            checks.append((sym.name, v, want))
            printed.append(c_literal_of(header, name))
        sym.set_value(default)
        kconf.load_config("configs/host_defconfig")
    with tempfile.TemporaryDirectory() as tmp:  # every accepted value's literal, printed by C
        src = os.path.join(tmp, "print.c")
        with open(src, "w") as f:
            f.write("#include <stdio.h>\nint main(void)\n{\n")
            for lit in printed:
                f.write(f"    fputs({lit}, stdout); putchar(0);\n")
            f.write("    return 0;\n}\n")
        exe = os.path.join(tmp, "print")
        cc = subprocess.run(["cc", "-Wall", "-Werror", "-o", exe, src], capture_output=True, text=True)
        if cc.returncode:
            problems.append(f"the literals do not compile: {cc.stderr.strip()[:300]}")
            out = []
        else:
            out = subprocess.run([exe], capture_output=True).stdout.split(b"\0")[:-1]
    for (name, v, want), got in zip(checks, out):
        if got != want.encode():
            problems.append(f"{name}={v!r} reached the header as {got!r}")
    if problems:
        print(f"not ok - hostile text in string symbols (SNN_FUZZ_SEED={seed}): " + "; ".join(problems[:5]))
    else:
        print(f"ok - hostile text in {len(strings)} string symbols x {len(values)} values: refused by name or "
              f"kept exactly ({len(checks)} compiled and printed; SNN_FUZZ_SEED={seed})")


if __name__ == "__main__":
    main()
