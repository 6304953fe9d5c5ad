#!/usr/bin/env python3
"""The autotuner: GEMM tiles and paths for one board, measured on the GPU present.

    tools/make/tune.py --board NAME [--budget 300] [--jobs N] [--work DIR] [--dry-run]
    make tune BOARD=NAME [TUNE_BUDGET=300]

Starts from configs/NAME_defconfig (the hand-made board, the baseline) and
tries what the board's target allows:
  tiles   one block/warp tile for every GEMM role at once (FWD, DGRAD, WGRAD;
          in a fused build the fused step's tile): one build times each role
          with it, and each role then takes its own best;
  step    the other training step: a fused board's layered step, and a
          layered board's fused one where the model's FP32 weights and
          momentum could be resident in an H100's shared memory (else only
          the grid-wide fused kernel could run it, which loses to the layered
          step from 784 units up: docs/PERF.md v11, v12); and in a fused
          build, the resident kernel that runs turned off;
  knobs   one value of one other setting at a time: the wgmma block (M and N
          together, and with the ping-pong schedule; the weight gradient's own ping-pong block and the
          copies of its update's inputs ahead), its stages and the thresholds that send a GEMM to wgmma
          or mma.sync, persistence and raster order; split-K slices and their
          least k; the mma.sync pipeline's stages; the bias gradients'
          blocks (columns and row slices); in a fused build its blocks and
          k slices.
Each candidate is first set in Kconfig (a value outside a range or whose
dependencies fail is refused, with Kconfig's reason), then compiled against
the tile checks alone (tools/make/tune_check.cu: a refused tile gets the check's
message, in a second), then built; on the GPU it must pass
tests/bin/gpu/test_kernels --quick (every GEMM role against the host reference
on a few awkward shapes and the MLP's, on FP32 operands and on twins;
test_fused too in a fused build) before tools/bin/bench_step
times the configured model's step: each call between events, its median (a
role's time is the sum of its calls), and the step as ./app/mnist runs it
(graph replays, or the fused kernel's launch; its mean), by which a knob or
the step is judged. In a fused build, the candidates that set nothing the
baseline's fused kernel reads (bench_step names it) are not built. A change
is taken only where it gains at least 2 %; the other step is taken alone,
only where it beats every candidate of the board's own step; the
changes taken together (the best first; one Kconfig refuses beside a better
one, such as the other ping-pong schedule, is left out) are built, checked
and timed as one more candidate. The fastest of it and the single
candidates is taken if it beats the baseline by 2 %, else the baseline
itself: the tuned board is never the slower of the two.

With several GPUs (--gpus: all by default, a count or ids; tools/lib/gpu_pool.py), the baseline is timed on
each, and the candidates are checked and timed side by side, one a GPU; a candidate's times are scaled by
the baseline's on GPU 0 over its own GPU's, so that GPUs of one kind that run a little apart do not pass
for a gain. The combination is timed on the first GPU.

The baseline is built and timed first; of what is then left of --budget
seconds (default 300), the other candidates' builds (--jobs at a time,
default one per two cores) start during the first 40 %, candidates are
timed until 85 % is gone, and the rest are reported as not tried;
the combination's build and timing come after (about a build's time over the
budget at most). Writes docs/tune/NAME.md (every candidate: its values, why
refused or its times, and why the choice) and, where the choice changes the
board, configs/NAME_tuned_defconfig (a comment line says it was generated,
where and from what). Where it keeps the board, no tuned file: the board is
the tuned build, and a tuned file an earlier run wrote is removed. --dry-run
lists and checks the candidates without a GPU. Work files: --work (default
build/tune/NAME).
"""
import argparse
import concurrent.futures
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

PROG = "tune"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # from tools/make/
sys.path.insert(0, os.path.join(REPO, "tools", "lib"))  # the shared modules
os.environ.setdefault("srctree", REPO)
import gpu_pool  # noqa: E402
import kconfig  # noqa: E402  (re-runs this script under /usr/bin/python3 where kconfiglib is not importable)
import step_floor  # noqa: E402
from run_logged import run_logged  # noqa: E402

kconfiglib = kconfig.kconfiglib
ROLES = ("FWD", "DGRAD", "WGRAD")
CALL_ROLES = {"linear_forward": "FWD", "linear_backward_input": "DGRAD", "linear_backward_weight_update": "WGRAD",
              "linear_backward_weight": "WGRAD"}  # the update pass (apply_update) is no tile's: counted in the step
STEP_UNIT = "us per step as ./app/mnist runs it"  # what a candidate's step time counts
GAIN = 0.98  # a change must bring a time to at most this fraction of the baseline's
BUILD_SHARE = 0.4  # of the budget left after the baseline: no build starts after it
MEASURE_SHARE = 0.85  # no candidate is checked and timed after it
# block M, N, K and warp M, N, K, for the tensor-core kernel (mma.sync) and for the FP32 SIMT kernel
TENSOR_TILES = [(32, 32, 32, 16, 16, 32), (64, 64, 16, 32, 32, 16), (32, 64, 32, 16, 32, 32),
                (64, 32, 32, 32, 16, 32), (64, 64, 32, 32, 32, 32), (64, 64, 64, 32, 32, 64),
                (32, 32, 64, 16, 16, 64), (64, 128, 32, 32, 64, 32), (128, 64, 32, 64, 32, 32),
                (128, 128, 32, 64, 64, 32), (32, 64, 256, 32, 32, 128), (16, 64, 64, 16, 32, 64)]
SIMT_TILES = [(64, 64, 16, 32, 32, 16), (32, 32, 16, 16, 16, 16), (32, 64, 16, 16, 32, 16),
              (64, 32, 16, 32, 16, 16), (64, 64, 32, 32, 32, 32), (128, 64, 16, 64, 32, 16),
              (128, 128, 8, 64, 64, 8), (32, 32, 32, 16, 16, 32)]
TILE_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N", "WARP_K")
# The other settings, each tried alone at these values (those the board's target has); a value sets one
# symbol, or several that only work together (the wgmma block's M and N). In the order builds start: on
# Hopper the wgmma path's first, as it runs the large GEMMs.
WGMMA_BLOCKS = [(128, 256), (128, 128), (128, 192), (256, 128)]
KNOBS = {
    # first: the weight gradient's update is where the wgmma boards' steps go (docs/PERF.md v13, v21)
    "GEMM_WGMMA_WGRAD_PINGPONG": [{"GEMM_WGMMA_WGRAD_PINGPONG": "y", "GEMM_WGMMA_EPI_STAGES": str(d)}
                                  for d in (0, 1, 2)],
    "GEMM_WGMMA_EPI_STAGES": ["1", "2"],
    "STEP_UPDATE_PASS": ["y", "n"],  # or the update apart from the GEMM (docs/PERF.md v36)
    # the weight steps on SMs of their own beside the rest of the backward pass (v62: 44 and 52 of 132 won)
    "STEP_BESIDE": [{"STEP_BESIDE": "y", "STEP_BESIDE_SMS": str(n)} for n in (44, 52)] + [{"STEP_BESIDE": "n"}],
    "GEMM_WGMMA_BLOCK": [{"GEMM_WGMMA_BLOCK_M": str(m), "GEMM_WGMMA_BLOCK_N": str(n)} for m, n in WGMMA_BLOCKS],
    "GEMM_WGMMA_PINGPONG": [{"GEMM_WGMMA_PINGPONG": "y", "GEMM_WGMMA_BLOCK_M": str(m), "GEMM_WGMMA_BLOCK_N": str(n)}
                            for m, n in [(128, 128), (64, 256)]],
    "GEMM_WGMMA_SMALL_BLOCK_N": ["64", "128"],
    "GEMM_WGMMA_SMALL_CHAINS": ["1", "2", "4"],
    "GEMM_WGMMA_SMALL_WGRAD_STAGES": ["4", "6"],  # a shallower ring beside the update's traffic (v60)
    "GEMM_WGMMA_SMALL_WGRAD_PANEL": ["y", "n"],  # A's rows kept across a block's tiles (v61)
    "GEMM_WGMMA_STAGES": ["3", "4", "5", "6"],
    "GEMM_WGMMA_MIN_K": ["1", "64", "128", "512"],
    "GEMM_WGMMA_MIN_MFLOP": ["0", "4", "16", "64"],
    "GEMM_WGMMA_PERSISTENT": ["y", "n"],
    "GEMM_WGMMA_RASTER_GROUP": ["4", "8", "16"],
    "FUSED_BLOCKS": ["0", "264"],
    "FUSED_SLICE_KTILES": ["4", "8", "16", "32"],
    "FUSED_CLUSTER_THREADS": ["128", "256", "384", "512", "1024"],
    "FUSED_GRID_RESIDENT_THREADS": ["256", "512", "1024"],
    "FUSED_GRID_RESIDENT_SPLIT": ["1", "2", "4"],
    "GEMM_SPLIT_K_MAX": ["1", "4", "8", "16"],
    "GEMM_SPLIT_K_MIN_K": ["128", "256", "512"],
    "GEMM_STAGES": ["2", "3", "4", "6"],
    # the bias gradients' blocks: more row slices for the batch's rows (docs/PERF.md v48: 16 x 32 took 1.7 us
    # off the 99 % board's step; the order of a bias gradient's sum, so its last bits, changes with them)
    "CUDA_BIAS": [{"CUDA_BIAS_COLS": c, "CUDA_BIAS_SLICES": s} for c, s in [("16", "32"), ("8", "32"), ("16", "16")]],
    # the step itself (a choice: one member set), and the resident fused kernels turned off
    "STEP": [{"STEP_FUSED": "y"}, {"STEP_LAYERED": "y"}],
    "FUSED_CLUSTER": ["n"],
    "FUSED_GRID_RESIDENT": ["n"],
}
# What each fused kernel reads of the candidates' symbols (prefixes): a fused board's candidate that sets
# none that its kernel reads would time the baseline again.
KERNEL_READS = {"grid-wide": ("GEMM_FUSED_", "FUSED_BLOCKS", "FUSED_SLICE_KTILES", "GEMM_STAGES"),
                "cluster": ("FUSED_CLUSTER",), "grid-resident": ("FUSED_GRID_RESIDENT",)}
# A layered board tries the fused step where its FP32 weights and momentum (8 bytes a parameter) could be
# resident in an H100's shared memory: 132 SMs of 227 KB.
FUSED_STATE_BYTES = 132 * 227 * 1024


def knob_values(knob):
    """KNOBS[knob] as {SYMBOL: value} dicts."""
    return [v if isinstance(v, dict) else {knob: v} for v in KNOBS[knob]]


def knob_symbols(knob):
    return list(dict.fromkeys(s for v in knob_values(knob) for s in v))

class Refusal(Exception):
    pass


def say(text):
    print(f"{PROG}: {datetime.datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


# ---- the board and its candidates (no GPU) --------------------------------------


class Board:
    """configs/NAME_defconfig in kconfiglib, and candidates' values set on it."""

    def __init__(self, name):
        self.name = name
        self.path = os.path.join(REPO, "configs", f"{name}_defconfig")
        if not os.path.exists(self.path):
            raise Refusal(f"no board {name!r}: no configs/{name}_defconfig (make help lists the boards)")
        self.kconf = kconfiglib.Kconfig(os.path.join(REPO, "Kconfig"), warn_to_stderr=False)
        self.kconf.warn_assign_undef = True
        problems = self.load({})
        if problems:
            raise Refusal(f"configs/{name}_defconfig: " + "; ".join(problems))
        if self.value("TARGET_CUDA") != "y":
            raise Refusal(f"{name} is a host board: the tuner times GPU kernels (pick a board of a GPU target)")
        self.fused = self.value("STEP_FUSED") == "y"
        self.params = step_floor.param_count(step_floor.board_dims(self.value))
        self.tensor_cores = self.value("GEMM_TENSOR_CORES") == "y"
        precision = next(c for c in self.kconf.choices if c.name == "PRECISION").selection
        self.precision = precision.name.removeprefix("PRECISION_")
        self.knob_names = self.find_knobs()
        self.baseline = {s: self.value(s) for s in self.tunables()}

    def value(self, sym):
        s = self.kconf.syms.get(sym)
        return s.str_value if s is not None else ""

    def load(self, values):
        """The board with values ({SYMBOL: str}) set; Kconfig's refusals, each naming the symbol."""
        self.kconf.warnings.clear()
        self.kconf.load_config(self.path)
        for sym, v in values.items():
            if sym not in self.kconf.syms:
                return [f"CONFIG_{sym} is not a symbol of this Kconfig"]
            s = self.kconf.syms[sym]
            for other in s.choice.syms if s.choice and v == "y" else []:
                if other is not s:
                    other.unset_value()
            s.set_value(v)
        if any(self.kconf.syms[sym].choice or v == "n" for sym, v in values.items()):
            # a switch (the other step, a kernel off): the board's settings of what it hides are dropped
            for sym in self.kconf.unique_defined_syms:
                if sym.user_value is not None and sym.name not in values and not sym.visibility:
                    sym.unset_value()
        problems, names = kconfig.value_problems(self.kconf)
        return problems + kconfig.untaken_values(self.kconf, skip=names)

    def tile_roles(self):
        return ["FUSED"] if self.fused else list(ROLES)

    def knobs(self):
        """The KNOBS this board can set (their symbols visible under its target and precision, as the board
        is) that its step reads: a fused build's step runs none of the layered path's wgmma or split-K
        GEMMs."""
        return self.knob_names

    def find_knobs(self):
        fused_knobs = ("STEP", "FUSED_", "GEMM_STAGES")
        return [k for k in KNOBS if all(s in self.kconf.syms and self.kconf.syms[s].visibility
                                        for s in knob_symbols(k))
                and (not self.fused or k.startswith(fused_knobs))]

    def tunables(self):
        return [f"GEMM_{r}_{f}" for r in self.tile_roles() for f in TILE_FIELDS] + \
            [s for k in self.knobs() for s in knob_symbols(k)]

    def write_min_config(self, values, path, header):
        self.check(values)
        self.kconf.write_min_config(path, header=header)

    def unchanged_by(self, values):
        """Whether the board with values set is the board: the same minimal defconfig."""
        self.check(values)
        changed = self.kconf._min_config_contents(header="")
        self.load({})
        return changed == self.kconf._min_config_contents(header="")

    def check(self, values):
        """Sets values on the board, or raises Kconfig's refusals."""
        problems = self.load(values)
        if problems:
            raise Refusal("; ".join(problems))

    def write_header(self, values, include_dir):
        """include_dir/generated/config.h of the board with values set (for tools/make/tune_check.cu)."""
        self.load(values)
        os.makedirs(os.path.join(include_dir, "generated"), exist_ok=True)
        with open(os.path.join(include_dir, "generated", "config.h"), "w") as f:
            f.write(kconfig.config_header(self.kconf, self.path))


class Candidate:
    def __init__(self, name, kind, values, role=None):
        self.name, self.kind, self.values, self.role = name, kind, values, role
        self.refused = None  # why it was refused, else None
        self.fused = None  # whether its build runs the fused step (set by kconfig_check)
        self.kernel = None  # the fused kernel bench_step named, in a fused build
        self.not_tried = None  # why it was not built or timed
        self.times = None  # step_times(): {"total": ..., per role ...}
        self.device = None  # the GPU bench_step named
        self.gpu = None  # the id of the GPU it was timed on, where several were


def tile_values(roles, tile):
    return {f"GEMM_{r}_{f}": str(v) for r in roles for f, v in zip(TILE_FIELDS, tile)}


def tile_text(tile):
    return "block {}x{}x{}, warp {}x{}x{}".format(*tile)


def enumerate_candidates(board):
    """The baseline, then a tile candidate per tile, then a knob candidate per value that differs from the
    board's, in that order (the order builds start in)."""
    roles = board.tile_roles()
    cands = [Candidate("baseline", "baseline", {})]
    own = {tuple(int(board.baseline[f"GEMM_{r}_{f}"]) for f in TILE_FIELDS) for r in roles}
    tiles = [Candidate(tile_text(t), "tile", tile_values(roles, t))
             for t in (TENSOR_TILES if board.tensor_cores else SIMT_TILES) if own != {t}]  # own: the baseline
    knobs = [Candidate(", ".join(f"CONFIG_{s}={v}" for s, v in values.items()), "knob", values, role=knob)
             for knob in board.knobs() for values in knob_values(knob)
             if any(board.baseline[s] != v for s, v in values.items())
             and (values != {"STEP_FUSED": "y"} or 8 * board.params <= FUSED_STATE_BYTES)]
    first = [c for c in knobs if c.role.startswith(("STEP", "FUSED_", "GEMM_WGMMA"))]
    return cands + first + tiles + [c for c in knobs if c not in first]


def kconfig_check(board, cands):
    for c in cands:
        problems = board.load(c.values)
        if problems:
            c.refused = "Kconfig: " + "; ".join(problems)
        c.fused = board.value("STEP_FUSED") == "y"


def reads(kernel, c):
    """Whether the fused kernel a build runs (bench_step's name) reads any of candidate c's symbols."""
    return c.role == "STEP" or any(s.startswith(KERNEL_READS[kernel]) for s in c.values)


def nvcc():
    found = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK)
                                     else None)
    if not found:
        raise Refusal("no nvcc: the tuner compiles each candidate (tools/setup.sh says how to get the CUDA toolkit)")
    return found


def compile_check(board, cands, work, jobs):
    """tools/make/tune_check.cu against each candidate's config.h: the tile checks' first message, if one fails."""
    todo = [c for c in cands if not c.refused]
    for i, c in enumerate(todo):
        board.write_header(c.values, os.path.join(work, "check", str(i), "include"))
    compiler = nvcc()

    def one(i):
        d = os.path.join(work, "check", str(i))
        p = subprocess.run([compiler, "-std=c++17", "-x", "cu", f"-I{d}/include", "-Iinclude", "-I.", "-c",
                            "tools/make/tune_check.cu", "-o", os.path.join(d, "check.o")],
                           cwd=REPO, capture_output=True, text=True)
        if p.returncode == 0:
            return None
        m = re.search(r'static assertion failed with "(.*)"', p.stderr)
        return m.group(1) if m else (p.stderr.strip().splitlines() or ["compile failed"])[0]

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for c, why in zip(todo, pool.map(one, range(len(todo)))):
            if why:
                c.refused = "tile check: " + why


# ---- on the GPU ---------------------------------------------------------------------


def candidate_dir(work, i):
    return os.path.join(work, f"c{i:02d}")


def configure(board, c, d):
    """The candidate's defconfig, d/def; an error text or None. One candidate at a time: every candidate is
    set on the board's one kconfiglib object, which two threads at once leave with either's values (the
    tuner's parallel builds did: some candidates refused, some built with another's values)."""
    os.makedirs(d, exist_ok=True)
    try:
        board.write_min_config(c.values, os.path.join(d, "def"), header="")
    except Refusal as e:
        return f"Kconfig: {e}"
    return None


def compile_configured(c, d):
    """Builds what a configured candidate needs (any number at once: make only); an error text or None."""
    log = os.path.join(d, "build.log")
    targets = [f"{d}/tools/bin/bench_step", f"{d}/tests/bin/gpu/test_kernels"]
    if c.fused:
        targets.append(f"{d}/tests/bin/gpu/test_fused")
    error = run_logged(["make", "--no-print-directory", f"O={d}", "defconfig", f"DEFCONFIG={d}/def"], log, 120,
                       "w") or \
        run_logged(["make", "--no-print-directory", f"O={d}", "-j2"] + targets, log, 900, "a")
    if error:
        with open(log) as f:
            lines = [line.strip() for line in f if "error" in line]
        return f"build {error}: {lines[0] if lines else 'see ' + log}"
    return None


def build(board, c, d):
    """Configures and builds what a candidate needs; an error text or None."""
    return configure(board, c, d) or compile_configured(c, d)


def parse_bench_step(text):
    """bench_step's output: [(call, ms)], the mean us of the step as ./app/mnist runs it (the fused kernel's
    step in a fused build, a layered step's graph replay otherwise; None if missing) and the fused kernel's
    name (None in a layered build)."""
    calls = [(m.group(1).strip(), float(m.group(2)))
             for m in re.finditer(r"^\| ([a-z_]+(?: [^|]*?)?) \| ([0-9.]+) \| [0-9.]+ % \|$", text, re.M)]
    m = re.search(r"(?:steps in one launch: |the step as \./app/mnist runs it .*? steps, )([0-9.]+) us per step", text)
    k = re.search(r"^# the fused kernel: (\S+)$", text, re.M)
    return calls, float(m.group(1)) if m else None, k.group(1) if k else None


def step_times(calls, step_us):
    """{"total": ..., role: ms, role + " tile": ms}: the step's us as ./app/mnist runs it; each role's calls
    (ms, between events), and those of them that run on its tile (the mma.sync or SIMT kernel: not wgmma,
    whose blocks are knobs), by which a tile is judged."""
    times = {k: 0.0 for r in ROLES for k in (r, r + " tile")}
    for call, ms in calls:
        role = CALL_ROLES.get(call.split()[0])
        if role:
            times[role] += ms
            if "[wgmma]" not in call:
                times[role + " tile"] += ms
    times["total"] = step_us
    return times


def measure(board, c, d, gpu=None):
    """Checks a built candidate against the host reference, then times it: on GPU `gpu` alone where given."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu) if gpu is not None else None
    c.gpu = gpu
    log = os.path.join(d, f"measure{'-gpu' + gpu if gpu is not None else ''}.log")
    open(log, "w").close()
    checks = [[f"{d}/tests/bin/gpu/test_kernels", "--quick"]] + \
        ([[f"{d}/tests/bin/gpu/test_fused"]] if c.fused else [])
    for cmd in checks:
        error = run_logged(cmd, log, 600, "a", env)
        with open(log) as f:
            failed = [line.strip() for line in f if line.startswith("not ok")]
        if error or failed:
            c.refused = f"{os.path.basename(cmd[0])}: " + (failed[0] if failed else error)
            return
    p = subprocess.run([f"{d}/tools/bin/bench_step"], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=env)
    with open(log, "a") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode:
        c.refused = f"bench_step exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1]}"
        return
    calls, step_us, c.kernel = parse_bench_step(p.stdout)
    if not calls or step_us is None:
        c.refused = "bench_step printed no times"
        return
    c.times = step_times(calls, step_us)
    m = re.search(r" on (.+?): median", p.stdout)
    c.device = m.group(1) if m else None


def scaled(times, factor):
    return {k: v * factor for k, v in times.items()}


def build_and_measure(board, cands, work, jobs, deadline, gpus):
    """Builds, checks and times the baseline (on each of gpus); then, of the time left until deadline,
    builds the other candidates in parallel for BUILD_SHARE (in a fused build, those its kernel reads), and
    checks and times each built one alone on a GPU, one a GPU at a time, until MEASURE_SHARE; a candidate's
    times scaled by the baseline's on the first GPU over its GPU's."""
    base = cands[0]
    say(f"building, checking and timing {base.name}" + (f" on {len(gpus)} GPUs" if len(gpus) > 1 else ""))
    base.refused = build(board, base, candidate_dir(work, 0))
    if base.refused:
        return
    probes = [base] + [Candidate(base.name, base.kind, base.values) for _ in gpus[1:]]
    for p in probes[1:]:
        p.fused = base.fused
    with concurrent.futures.ThreadPoolExecutor(len(probes)) as pool:
        list(pool.map(lambda pg: measure(board, pg[0], candidate_dir(work, 0), pg[1]),
                      zip(probes, gpus or [None])))
    # a GPU's factor: the baseline's step on the first GPU over its step on this one; a GPU the baseline
    # failed on times nothing
    factor = {p.gpu: base.times["total"] / p.times["total"] if base.times else 1.0
              for p in probes if p is base or p.times}
    for p in probes[1:]:
        if not p.times:
            say(f"GPU {p.gpu} left out: the baseline there: {p.refused or 'no times'}")
    gpus = [g for g in gpus if g in factor]
    now = time.monotonic()
    build_deadline = now + BUILD_SHARE * (deadline - now)
    measure_deadline = now + MEASURE_SHARE * (deadline - now)
    todo = []
    for i, c in enumerate(cands[1:], 1):
        if c.refused:
            continue
        if base.kernel and not reads(base.kernel, c):
            c.not_tried = f"not built: the board's fused kernel ({base.kernel}) reads none of its settings"
        else:
            c.refused = configure(board, c, candidate_dir(work, i))  # here, before the threads: see configure
            if not c.refused:
                todo.append((i, c))
    built = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        def start(i, c):
            if time.monotonic() > build_deadline:
                c.not_tried = "not built: the budget's build time was spent"
                return None
            say(f"building {c.name}")
            return compile_configured(c, candidate_dir(work, i))
        for (i, c), error in zip(todo, pool.map(lambda ic: start(*ic), todo)):
            if error:
                c.refused = error
            elif not c.not_tried:
                built.append((i, c))
    def timed(i, c, gpu):
        if time.monotonic() > measure_deadline:
            c.not_tried = "built, not timed: the budget was spent"
            return
        say(f"checking and timing {c.name}" + (f" on GPU {gpu}" if len(gpus) > 1 else ""))
        measure(board, c, candidate_dir(work, i), gpu)
        if c.times:
            c.times = scaled(c.times, factor[gpu])
    gpu_pool.spread_calls([lambda gpu, i=i, c=c: timed(i, c, gpu) for i, c in built], gpus)


# ---- the choice ---------------------------------------------------------------------


def better(a, b):
    """True when time a gains at least 1 - GAIN on time b."""
    return a is not None and b is not None and a <= GAIN * b


def choose(board, cands):
    """The changes worth taking: {SYMBOL: value}, and a line per decision."""
    base = cands[0]
    if not base.times:
        raise Refusal(f"the baseline (the board as it is) was not measured: {base.refused or base.not_tried}")
    timed = [c for c in cands[1:] if c.times]
    step = min((c for c in timed if c.role == "STEP"), key=lambda c: c.times["total"], default=None)
    own = [c for c in timed if c.role != "STEP"]
    if step and better(step.times["total"], base.times["total"]) and \
            all(step.times["total"] <= c.times["total"] for c in own):
        return dict(step.values), [f"{step.name}: step {step.times['total']:.4g} against the board's "
                                   f"{base.times['total']:.4g}, and no candidate of the board's own step does "
                                   "better: taken alone (the other step reads none of the board's other knobs)"]
    values, why = {}, []
    timed = own
    tiles = [c for c in timed if c.kind == "tile"]
    for role in board.tile_roles():
        key = "total" if board.fused else role + " tile"
        best = min(tiles, key=lambda c: c.times[key], default=None)
        if not base.times[key]:
            why.append(f"{role}: none of its GEMMs runs on the tile (all on wgmma): the board's tile")
        elif best and better(best.times[key], base.times[key]):
            values.update({s: v for s, v in best.values.items() if s.startswith(f"GEMM_{role}_")})
            why.append(f"{role}: {best.name}, {best.times[key]:.4g} against the board's {base.times[key]:.4g}")
        else:
            why.append(f"{role}: the board's tile" + (f" (best other: {best.name}, {best.times[key]:.4g} "
                                                      f"against {base.times[key]:.4g})" if best else ""))
    gains = []
    for knob in board.knobs():
        tried = [c for c in timed if c.role == knob]
        best = min(tried, key=lambda c: c.times["total"], default=None)
        if best and better(best.times["total"], base.times["total"]):
            gains.append(best)
    # the best first: where two exclude each other in Kconfig (the two ping-pong schedules), the better stays
    for best in sorted(gains, key=lambda c: c.times["total"]):
        line = f"{best.name}: step {best.times['total']:.4g} against {base.times['total']:.4g}"
        problems = board.load(dict(values, **best.values))
        if problems:
            why.append(f"{line}; not with the changes above: {problems[0]}")
            continue
        values.update(best.values)
        why.append(line)
    return values, why


def final_choice(cands, combined):
    """The tuned values: the fastest of the combination and the single candidates, if it beats the baseline by
    2 %, else the baseline's (none)."""
    base = cands[0]
    timed = [c for c in cands[1:] + ([combined] if combined else []) if c.times]
    best = min(timed, key=lambda c: c.times["total"], default=None)
    if not timed:
        return base, "no candidate was timed within the budget: the hand-made values stay"
    if not better(best.times["total"], base.times["total"]):
        return base, "nothing beat the board by 2 %: the hand-made values stay"
    if best is combined:
        return best, "the changes together beat the board and every single candidate"
    return best, ("the changes together did not beat it" if combined and combined.times else
                  "no combination was timed") + f"; the best single candidate beats the board: {best.name}"


# ---- outputs ------------------------------------------------------------------------


def report(board, cands, combined, chosen, why, reason, kept, device, budget, elapsed, gpus=1):
    on = f"{gpus} x {device} (each candidate on one; its times scaled by the baseline's on the first over its " \
        "GPU's)" if gpus > 1 else device
    lines = [f"# Tuning {board.name}", "",
             f"`make tune BOARD={board.name}` (tools/make/tune.py) on {on}, "
             f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}: budget {budget} s, took {elapsed:.0f} s. "
             f"Times: the roles in ms (tools/bin/bench_step: the sum of their calls, each call's median of 30 "
             f"steps between events), the step in {STEP_UNIT} (graph replays, or the fused kernel's launch: the mean "
             "of up to 400 steps, median of 5).", "",
             f"GEMM precision: {board.precision}, the board's. The tuner keeps it: a precision is chosen by "
             "parity with PyTorch (tools/torch_parity.py), which a step's timing cannot judge; each GPU "
             "target's default is the fastest that passes it (BF16 on sm80 and sm90).", "",
             "| candidate | kind | FWD | DGRAD | WGRAD | step | verdict |", "|---|---|---|---|---|---|---|"]
    for c in cands + ([combined] if combined else []):
        if c.times:
            t = c.times
            cells = [f"{t[r]:.4f}" if not c.fused else "-" for r in ROLES] + \
                [f"{t['total']:.4g}", "timed" + (f": the {c.kernel} fused kernel" if c.kernel else ": layered")]
        else:
            cells = ["-", "-", "-", "-", (c.refused or c.not_tried or "").replace("|", "/")]
        lines.append(f"| {c.name} | {c.kind} | " + " | ".join(cells) + " |")
    lines += ["", "## Choice", ""] + [f"- {w}" for w in why] + [f"- {reason}."]
    lines += ["", "Values taken: " + (", ".join(f"`CONFIG_{s}={v}`" for s, v in chosen.values.items()) or "none"),
              ""]
    if kept:
        lines += [f"The board is kept: no `configs/{board.name}_tuned_defconfig` is written (`make "
                  f"{board.name}_defconfig` is the tuned build), and one an earlier run wrote is removed.", ""]
    return "\n".join(lines)


def write_outputs(board, chosen, base, text, kept, device, root=REPO):
    """docs/tune/NAME.md, and configs/NAME_tuned_defconfig unless the board is kept; what it did, a line."""
    tuned = os.path.join(root, "configs", f"{board.name}_tuned_defconfig")
    docs = os.path.join(root, "docs", "tune", f"{board.name}.md")
    generated = f"# Generated by 'make tune BOARD={board.name}'"
    if kept:
        # A copy of the board would be a second name for the same build. A tuned file an earlier run wrote
        # goes too: this run found nothing that beats the board, so the old values, which it may not even
        # have timed, would outlive the report that chose them (git keeps them). A file without the
        # tuner's first line is someone's own, and stays.
        try:
            with open(tuned) as f:
                stale = f.readline().startswith(generated)
        except FileNotFoundError:
            stale = False
        if stale:
            os.remove(tuned)
        done = f"kept the board: no {os.path.relpath(tuned, root)}" + (" (removed the earlier run's)" if stale else "")
    else:
        header = (f"{generated} (tools/make/tune.py) on {device}, "
                  f"{datetime.date.today()}, {board.precision}: step {base.times['total']:.4g} -> "
                  f"{chosen.times['total']:.4g} "
                  f"({STEP_UNIT}); report docs/tune/{board.name}.md\n")
        board.write_min_config(chosen.values, tuned, header)
        done = f"wrote {os.path.relpath(tuned, root)}"
    os.makedirs(os.path.dirname(docs), exist_ok=True)
    with open(docs, "w") as f:
        f.write(text)
    return f"{done}; wrote {os.path.relpath(docs, root)}"


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--board", required=True, help="configs/NAME_defconfig to tune")
    p.add_argument("--budget", type=int, default=300, help="seconds (default 300)")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="builds at once")
    p.add_argument("--work", help="work directory (default build/tune/NAME)")
    p.add_argument("--dry-run", action="store_true", help="list and check the candidates; no build, no GPU")
    p.add_argument("--gpus", help="the GPUs to time on: all (default), a count, or ids (0,2)")
    args = p.parse_args(argv)
    if args.budget < 1 or args.jobs < 1:
        p.error("--budget and --jobs must be positive")
    try:
        args.gpus = gpu_pool.choose_gpus(args.gpus, gpu_pool.host_gpus()) if not args.dry_run else []
    except ValueError as e:
        p.error(str(e))
    args.work = os.path.abspath(args.work or os.path.join(REPO, "build", "tune", args.board))
    return args


def main(argv):
    args = parse_args(argv)
    started = time.monotonic()
    try:
        board = Board(args.board)
        cands = enumerate_candidates(board)
        kconfig_check(board, cands)
        compile_check(board, cands, args.work, args.jobs)
        if args.dry_run:
            for c in cands:
                print(f"{c.kind:8} {c.name}: {'refused: ' + c.refused if c.refused else 'ok'}")
            return 0
        say(f"{board.name}: {sum(not c.refused for c in cands)} candidates to build, "
            f"{sum(bool(c.refused) for c in cands)} refused")
        build_and_measure(board, cands, args.work, args.jobs, started + args.budget, args.gpus)
        values, why = choose(board, cands)
        combined = None
        if values and not any(c.values == values for c in cands):  # else that candidate was timed already
            combined = Candidate("the changes together", "combined", values)
            d = candidate_dir(args.work, len(cands))
            say(f"building, checking and timing {combined.name}")
            kconfig_check(board, [combined])
            combined.refused = combined.refused or build(board, combined, d)
            if not combined.refused:
                measure(board, combined, d, args.gpus[0] if args.gpus else None)
        chosen, reason = final_choice(cands, combined)
        kept = board.unchanged_by(chosen.values)
        device = cands[0].device or "unknown GPU"
        text = report(board, cands, combined, chosen, why, reason, kept, device, args.budget,
                      time.monotonic() - started, len(args.gpus))
        done = write_outputs(board, chosen, cands[0], text, kept, device)
    except Refusal as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    say(f"{done}, in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
