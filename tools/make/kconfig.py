#!/usr/bin/env python3
"""staticnn's front end to kconfiglib: the config targets of the Makefile.

    kconfig.py genconfig OUT_DIR         .config -> OUT_DIR/include/generated/config.h
                                         and OUT_DIR/include/config/auto.conf
    kconfig.py defconfig FILE            FILE (a minimal config) -> .config
    kconfig.py savedefconfig FILE        .config -> FILE (minimal)
    kconfig.py olddefconfig              bring .config up to date with Kconfig
    kconfig.py menuconfig                the terminal UI
    kconfig.py symbols                   every symbol's name and type (and a choice member's siblings)

The .config path comes from KCONFIG_CONFIG (default: .config). Every kconfiglib
warning is an error here: kconfiglib silently falls back to a default when a
value is out of range or malformed, and a static build must not.
"""
import os
import re
import struct
import sys

PROG = "kconfig"
DECIMALS = {  # string symbols that hold a decimal, with the interval they must lie in
    "TRAIN_LR": (0.0, False, float("inf"), False),
    "TRAIN_MOMENTUM": (0.0, True, 1.0, False),
    "TRAIN_ADAM_BETA1": (0.0, True, 1.0, False),
    "TRAIN_ADAM_BETA2": (0.0, True, 1.0, False),
    "TRAIN_ADAM_EPS": (0.0, False, float("inf"), False),
    "TRAIN_WEIGHT_DECAY": (0.0, True, float("inf"), False),
    "TRAIN_LR_GAMMA": (0.0, False, 1.0, True),
    "TRAIN_LR_FINAL": (0.0, True, 1.0, True),
    "TRAIN_LABEL_SMOOTHING": (0.0, True, 1.0, False),
    "TRAIN_DROPOUT": (0.0, True, 1.0, False),
    "TRAIN_AFFINE_ROTATE": (0.0, True, 90.0, True),
    "TRAIN_AFFINE_SCALE": (0.0, True, 1.0, False),
    "TRAIN_AFFINE_SHEAR": (0.0, True, 1.0, True),
    "TRAIN_AFFINE_TRANSLATE": (0.0, True, 8.0, True),
    "TRAIN_ELASTIC_ALPHA": (0.0, True, 200.0, True),
    "TRAIN_ELASTIC_SIGMA": (0.5, True, 6.5, True),
}
DECIMAL_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
FLT_MIN = 1.1754943508222875e-38  # the least normal float: the engine flushes smaller ones to zero


def as_float32(v):
    """v as the engine holds it, a C float (round to nearest); inf where it overflows."""
    try:
        return struct.unpack("f", struct.pack("f", v))[0]
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def die(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    import kconfiglib
except ImportError:
    # Debian's python3-kconfiglib serves /usr/bin/python3, which may not be
    # the python3 first on PATH (pyenv, a venv).
    SYSTEM_PYTHON = "/usr/bin/python3"
    if os.access(SYSTEM_PYTHON, os.X_OK) and not os.environ.get("SNN_KCONFIG_REEXEC"):
        os.environ["SNN_KCONFIG_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    die("kconfiglib is missing: run 'apt-get install python3-kconfiglib' "
        "(or 'pip install kconfiglib')")


def config_path():
    return os.environ.get("KCONFIG_CONFIG", ".config")


def load(path, must_exist=True):
    kconf = kconfiglib.Kconfig("Kconfig", warn_to_stderr=False)
    kconf.warn_assign_undef = True
    if path is not None:
        if not os.path.exists(path):
            if must_exist:
                die(f"no {path}: run 'make host_defconfig' (or another "
                    "'make <board>_defconfig', see 'make help') or 'make menuconfig'")
            return kconf
        kconf.load_config(path)
        refuse_warnings(kconf, path)
    return kconf


def value_problems(kconf):
    """kconfiglib's warnings about the values a file sets, as messages that
    name the symbol: (problems, names of the symbols they are about)."""
    for sym in kconf.unique_defined_syms:
        sym.str_value  # values are computed lazily, and so are their range warnings
    problems, names = [], set()
    for w in kconf.warnings:
        w = w.removeprefix("warning: ")
        m = re.search(r"user value (\S+) on the \w+ symbol (\w+) .*?outside the active range \(\[(\S+), (\S+)\]\)", w)
        if m:
            val, sym, lo, hi = m.groups()
            problems.append(f"CONFIG_{sym}={val} is outside its range {lo}..{hi}")
            names.add(sym)
            continue
        m = re.search(r"malformed .*?'([^']*)' for (\w+)|'([^']*)' is not a valid value for the (\w+) symbol (\w+)", w)
        if m and m.group(2):
            problems.append(f"CONFIG_{m.group(2)}={m.group(1)} is not a valid value")
            names.add(m.group(2))
            continue
        if m:
            problems.append(f"CONFIG_{m.group(5)}={m.group(3)} is not a valid {m.group(4)}")
            names.add(m.group(5))
            continue
        m = re.search(r"undefined symbol (\w+)", w)
        if m:
            problems.append(f"CONFIG_{m.group(1)} is not a symbol of this Kconfig "
                            "(stale config: run 'make olddefconfig')")
            continue
        problems.append(w.strip())
    return problems, names


def refuse_warnings(kconf, path):
    problems, names = value_problems(kconf)
    problems += untaken_values(kconf, skip=names)
    if problems:
        die(f"{path}: " + "; ".join(problems))


def untaken_values(kconf, skip=()):
    """Values the file sets that Kconfig did not take (a dependency is not met):
    kconfiglib drops them silently, which would build something else. Symbols
    in skip already have a message."""
    problems = []
    for sym in kconf.unique_defined_syms:
        if sym.user_value is None or sym.name in skip:
            continue
        want = sym.user_value
        if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
            want = kconfiglib.TRI_TO_STR[want]
        if str(want) != sym.str_value and not (want == "n" and sym.str_value == ""):
            dep = re.sub(r" && <choice \w+>|<choice \w+> && ", "", kconfiglib.expr_str(sym.direct_dep))
            problems.append(f"CONFIG_{sym.name}={want} cannot be set (it depends on {dep}; "
                            "change that first, or run 'make olddefconfig')")
    return problems


def die_unless_single(path, name, text, v, interval, lo, lo_closed, hi, hi_closed):
    """The decimal as a float, the type the engine computes with, still in its interval and not
    flushed to zero: 1e-50 is 0 there and 0.999999999 is 1."""
    f = as_float32(v)
    if f in (float("inf"), float("-inf")):
        die(f"{path}: CONFIG_{name}={text} is too large for single precision (at most 3.4e38; "
            "fix it with 'make menuconfig')")
    if v != 0 and abs(f) < FLT_MIN:
        die(f"{path}: CONFIG_{name}={text} is below single precision's least normal number, 1.18e-38: the "
            "engine, which flushes smaller numbers to zero, would compute with 0 (fix it with 'make menuconfig')")
    if not ((f > lo or (lo_closed and f == lo)) and (f < hi or (hi_closed and f == hi))):
        die(f"{path}: CONFIG_{name}={text} is {f!r} in single precision, the engine's, outside {interval} "
            "(fix it with 'make menuconfig')")


def check_values(kconf, path):
    """Checks Kconfig cannot express: decimals (those in use, as doubles and as the engine's floats),
    Nesterov's momentum, the data root, the validation split, the resident kernels' whole warps.
    Returns {name: float}."""
    values = {}
    for name, (lo, lo_closed, hi, hi_closed) in DECIMALS.items():
        if not kconf.syms[name].visibility:
            continue  # its dependency is off: not in the config, not used
        text = kconf.syms[name].str_value.strip()
        if not DECIMAL_RE.match(text):
            die(f"{path}: CONFIG_{name}=\"{text}\" is not a decimal number "
                "(write it like 0.05 or 5e-2; fix it with 'make menuconfig')")
        v = float(text)
        interval = f"{'[' if lo_closed else '('}{lo:g}, {hi:g}{']' if hi_closed else ')'}"
        if not ((v > lo or (lo_closed and v == lo)) and (v < hi or (hi_closed and v == hi))):
            die(f"{path}: CONFIG_{name}={text} is outside {interval} (fix it with 'make menuconfig')")
        die_unless_single(path, name, text, v, interval, lo, lo_closed, hi, hi_closed)
        values[name] = v
    if "TRAIN_DROPOUT" in values and int(values["TRAIN_DROPOUT"] * 16777216.0 + 0.5) >= 16777216:
        die(f"{path}: CONFIG_TRAIN_DROPOUT={values['TRAIN_DROPOUT']!r} is within 2^-25 of 1: its 24-bit "
            "threshold (kernels/noise.h) would drop every unit (fix it with 'make menuconfig')")
    data_root = kconf.syms["DATA_ROOT"].str_value
    if not data_root:
        die(f"{path}: CONFIG_DATA_ROOT is empty: name the directory that holds the datasets' directories "
            "(the default is data, in the source tree; fix it with 'make menuconfig')")
    if any(ord(c) < 0x20 or c == "\x7f" for c in data_root):
        die(f"{path}: CONFIG_DATA_ROOT holds a control character (fix it with 'make menuconfig')")
    if kconf.syms["TRAIN_NESTEROV"].str_value == "y" and values.get("TRAIN_MOMENTUM") == 0.0:
        die(f"{path}: CONFIG_TRAIN_NESTEROV needs CONFIG_TRAIN_MOMENTUM above 0 "
            "(fix it with 'make menuconfig')")
    held, eval_batch = (int(kconf.syms[n].str_value) for n in ("TRAIN_VALIDATION_SIZE", "EVAL_BATCH_SIZE"))
    if held % eval_batch:
        die(f"{path}: CONFIG_TRAIN_VALIDATION_SIZE={held} is not a multiple of CONFIG_EVAL_BATCH_SIZE={eval_batch} "
            "(fix it with 'make menuconfig')")
    import step_floor
    batch, fit = int(kconf.syms["TRAIN_BATCH_SIZE"].str_value), step_floor.TRAIN_SAMPLES - held
    if batch > fit:
        die(f"{path}: CONFIG_TRAIN_BATCH_SIZE={batch} exceeds the {fit} training images that "
            f"CONFIG_TRAIN_VALIDATION_SIZE={held} leaves (fix it with 'make menuconfig')")
    for name in ("FUSED_CLUSTER_THREADS", "FUSED_GRID_RESIDENT_THREADS"):
        threads = kconf.syms[name]
        if threads.visibility and int(threads.str_value) % 32:
            die(f"{path}: CONFIG_{name}={threads.str_value} is not a multiple of 32, whole warps "
                "(fix it with 'make menuconfig')")
    return values


def c_string(text):
    """text as a C string literal: printable ASCII as it is, the rest as octal escapes of its UTF-8."""
    out = []
    for b in text.encode():
        c = chr(b)
        out.append("\\" + c if c in '"\\?' else c if 0x20 <= b < 0x7f else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


SOURCE_TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # from tools/make/
sys.path.insert(0, os.path.join(SOURCE_TREE, "tools", "lib"))  # the data-parallel prediction's modules


def config_header(kconf, path):
    """generated/config.h's text: kconfiglib's, each decimal in use as a C constant (_VALUE) with a
    flag the preprocessor can test (_NONZERO), and the data root made absolute: a relative one is
    taken from the source tree, where 'make data' fetches, whatever directory the program runs in."""
    decimals = check_values(kconf, path)
    header = kconf._autoconf_contents("/* generated from " + path + " by tools/make/kconfig.py; do not edit */\n")
    root = os.path.join(SOURCE_TREE, kconf.syms["DATA_ROOT"].str_value)
    return header + "".join(f"#define CONFIG_{n}_VALUE {v!r}\n#define CONFIG_{n}_NONZERO {int(v != 0)}\n"
                            for n, v in decimals.items()) + f"#define CONFIG_DATA_ROOT_ABSOLUTE {c_string(root)}\n"


def board_of(kconf):
    """(widths, batch, precision) of a loaded configuration: tools/roofline.py's and the prediction's."""
    import step_floor
    sym = lambda s: kconf.syms[s].str_value  # noqa: E731
    precision = next((p for p in step_floor.PRECISIONS if kconf.syms.get("PRECISION_" + p.upper()) is not None
                      and sym("PRECISION_" + p.upper()) == "y"), "fp32")
    return step_floor.board_dims(sym), int(sym("TRAIN_BATCH_SIZE")), precision


TUNED_STEP = re.compile(r"step [0-9.]+ -> ([0-9.]+) \(us per step")


def tuned_step_us(board):
    """The one-GPU step of this (widths, batch, precision) as 'make tune' measured it on an H100, from the
    header of a configs/*_tuned_defconfig with the same model, batch and precision; or None."""
    folder = os.path.join(SOURCE_TREE, "configs")
    for name in sorted(os.listdir(folder)):
        if not name.endswith("_tuned_defconfig"):
            continue
        path = os.path.join(folder, name)
        with open(path) as f:
            m = TUNED_STEP.search(f.readline())
        if not m:
            continue
        tuned = kconfiglib.Kconfig(os.path.join(SOURCE_TREE, "Kconfig"), warn_to_stderr=False)
        tuned.load_config(path)
        if board_of(tuned) == board:
            return float(m[1])
    return None


def dp_prediction(kconf):
    """(speed-up, one line) of a data-parallel build (CONFIG_DP), or None. The step on one GPU as 'make tune'
    measured it where a tuned board has this model, batch and precision, else at its floor (then a lower
    bound: a slower step gains more); split over the world; then its gradients all-reduced (the measured
    table) and the update pass, both counted whole (tools/lib/allreduce.py's engine_speedup: from a measured
    one-GPU step; since v45 pessimistic by up to 24 % on 2 H200s, docs/PERF.md v35, v44, v45)."""
    if kconf.syms["DP"].str_value != "y":
        return None
    import allreduce
    import step_floor
    board = board_of(kconf)
    dims, batch, precision = board
    world = int(kconf.syms["DP_WORLD_SIZE"].str_value)
    reduce = "bf16" if kconf.syms["DP_REDUCE_BF16"].str_value == "y" else "fp32"
    grad = step_floor.param_count(dims) * allreduce.REDUCE_BYTES[reduce]
    measured = tuned_step_us(board)
    if measured:
        step_us, bound, step = measured, "", f"the {measured:.0f} us step make tune measured on an H100"
    else:
        r = step_floor.floor(dims, batch, precision, step_floor.DEFAULT_PEAKS)
        step_us = r["floor_ms_epoch"] * 1e3 / r["steps"]
        bound, step = "at least ", f"a {step_us:.0f} us step at its floor on an H100"
    sym = lambda s: kconf.syms[s].str_value  # noqa: E731
    moments = 2 if sym("TRAIN_OPTIMIZER_ADAMW") == "y" else int(float(sym("TRAIN_MOMENTUM") or 0) != 0)
    update = allreduce.update_us(step_floor.param_count(dims), reduce, moments)
    speedup = allreduce.engine_speedup(step_us, grad, world, update)
    return speedup, (f"{bound}{speedup:.2f}x on {world} GPUs ({step}, split; {grad / 1e6:.1f} MB of "
                     f"{reduce.upper()} gradients all-reduced in {allreduce.allreduce_us(grad, world):.0f} us and "
                     f"an update pass of {update:.0f} us, both counted whole: tools/lib/allreduce.py)")


def dp_warning(p, path):
    """The configure-time warning of a data-parallel build whose prediction p (dp_prediction's) is below
    1.1x, or ""."""
    if not p or p[0] >= 1.1:
        return ""
    return (f"{path}: data parallelism predicts {p[1]}: below 1.1x, the all-reduce and the update pass cost "
            "about what the GPUs gain (docs/PERF.md v30); the count is pessimistic where part of both hides, by up "
            "to 24 % on 2 H200s (v45: 784-16384x2 b2048 predicted 0.90x, measured 1.18x); a larger batch on the "
            "same model pays more")


def width_warning(kconf, path):
    """The configure-time warning of a layered build with 16-bit twins (CONFIG_GEMM_TWINS) where a hidden width is not
    a multiple of 8, or "": that layer's 16-bit rows are not whole 16-byte chunks, which TMA and the twins'
    loads need (kernels/cuda/twin.cuh, snn_twin_rows_aligned), so every GEMM reading them (the layer's own
    weight gradient, the next layer's three) runs on mma.sync from the FP32 operands, rounded as staged."""
    twins, layered = kconf.syms.get("GEMM_TWINS"), kconf.syms.get("STEP_LAYERED")
    if twins is None or twins.str_value != "y" or layered is None or layered.str_value != "y":
        return ""  # the fused kernels stage their operands themselves
    import step_floor
    odd = [w for w in step_floor.board_dims(lambda s: kconf.syms[s].str_value)[1:-1] if w % 8]
    if not odd:
        return ""
    near = ", ".join(sorted({f"{w} -> {w + 8 - w % 8}" for w in odd}, key=lambda t: int(t.split()[0])))
    return (f"{path}: hidden widths not a multiple of 8 ({', '.join(map(str, odd))}): their 16-bit rows are not "
            "whole 16-byte chunks, so every GEMM that reads them runs on mma.sync from the FP32 operands "
            f"instead of wgmma or the 16-bit twins (docs/PERF.md v31); {near} would not")


def write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def genconfig(out_dir):
    path = config_path()
    kconf = load(path)
    missing = [s.name for s in kconf.unique_defined_syms
               if s.visibility and s.config_string and s.user_value is None
               and s.choice is None]
    if missing:
        die(f"{path} is stale: it does not set {', '.join('CONFIG_' + m for m in missing)}; "
            "run 'make olddefconfig' (take the defaults) or 'make menuconfig'")
    header = config_header(kconf, path)
    hdr = os.path.join(out_dir, "include/generated/config.h")
    # include/config/auto.conf (the values, for make), and a file per symbol touched when its value
    # changes: the objects depend on the symbols they name (tools/make/fixdep.c), not on config.h.
    os.makedirs(os.path.join(out_dir, "include"), exist_ok=True)  # sync_deps makes only the last level
    kconf.sync_deps(os.path.join(out_dir, "include/config"))
    if write_if_changed(hdr, header):
        print(f"  GEN     {hdr}")
    # The prediction's own header (app/mnist.c prints it), and its warning for the Makefile to show.
    p = dp_prediction(kconf)
    write_if_changed(os.path.join(out_dir, "include/generated/dp_prediction.h"),
                     "/* generated by tools/make/kconfig.py from the data-parallel build's shape */\n"
                     f"#define SNN_DP_PREDICTION {c_string(p[1] if p else '')}\n")
    warning = dp_warning(p, path)
    write_if_changed(os.path.join(out_dir, "include/generated/dp_warning.txt"), warning)
    write_if_changed(os.path.join(out_dir, "include/generated/width_warning.txt"), width_warning(kconf, path))


def defconfig(src):
    if not os.path.exists(src):
        die(f"no defconfig {src} (see 'make help' for the boards)")
    kconf = load(src)
    check_values(kconf, src)
    kconf.write_config(config_path(), save_old=False)
    print(f"  CONF    {config_path()} from {src}")
    for warning in (dp_warning(dp_prediction(kconf), src), width_warning(kconf, src)):
        if warning:
            print(f"warning: {warning}")


def savedefconfig(dst):
    kconf = load(config_path())
    kconf.write_min_config(dst)
    print(f"  SAVE    {dst}")


def olddefconfig():
    """New symbols take their defaults and symbols Kconfig no longer has are
    dropped, each with a note; a value out of range or malformed is refused,
    never replaced by the default behind the user's back."""
    kconf = kconfiglib.Kconfig("Kconfig", warn_to_stderr=False)
    path = config_path()
    if os.path.exists(path):
        kconf.load_config(path)
    problems, _ = value_problems(kconf)
    refused = [p for p in problems if "is not a symbol of this Kconfig" not in p]
    if refused:
        die(f"{path}: " + "; ".join(refused) + " (fix it with 'make menuconfig' or in the file)")
    for p in problems:
        print(f"{PROG}: note: {p.split(' (stale')[0]} (dropped)", file=sys.stderr)
    if os.path.exists(path):
        check_values(kconf, path)
    kconf.write_config(path, save_old=False)
    print(f"  CONF    {path} brought up to date")


def menuconfig():
    import menuconfig as mc  # shipped with kconfiglib
    os.environ.setdefault("MENUCONFIG_STYLE", "aquatic")
    mc.menuconfig(kconfiglib.Kconfig("Kconfig"))
    # menuconfig saves only on request; validate what it saved
    if os.path.exists(config_path()):
        check_values(load(config_path()), config_path())


def symbols():
    """Each symbol's name and type, a line each, and for a choice's member the other members (tools/sweep.py
    --set writes values by them, and drops a member's siblings where it sets the member)."""
    kconf = load(None)
    for sym in sorted(kconf.unique_defined_syms, key=lambda s: s.name):
        siblings = [s.name for s in sym.choice.syms if s is not sym] if sym.choice else []
        print(sym.name, kconfiglib.TYPE_TO_STR[sym.orig_type], *([",".join(siblings)] if siblings else []))


def main(argv):
    cmds = {"genconfig": (genconfig, 1), "defconfig": (defconfig, 1),
            "savedefconfig": (savedefconfig, 1), "olddefconfig": (olddefconfig, 0),
            "menuconfig": (menuconfig, 0), "symbols": (symbols, 0)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        die("usage: kconfig.py {genconfig OUT_DIR|defconfig FILE|savedefconfig FILE|olddefconfig|menuconfig|symbols}")
    fn, _ = cmds[argv[1]]
    try:
        fn(*argv[2:])
    except kconfiglib.KconfigError as e:  # a Kconfig file that does not parse: one line, not a traceback
        die(" ".join(str(e).split(". Check that environment")[0].split()))


if __name__ == "__main__":
    main(sys.argv)
