#!/usr/bin/env python3
"""tools/make/tune.py without a GPU: the candidates it enumerates per target, the
ones it refuses and why, the choice it makes from given times, what it writes
(no tuned defconfig where it keeps the board), and that the defconfig it
writes configures and builds.

    tests/host/test_tune.py OUT_DIR
"""
import os
import subprocess
import sys
import threading
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(REPO, "tools", "make"))
import tune  # noqa: E402


def verdict(ok, name, why=""):
    print(f"ok - tune: {name}" if ok else f"not ok - tune: {name}: {why}", flush=True)


def check_enumeration():
    for name, roles, kinds in [("h100_2048x3_b256", tune.ROLES, {"baseline", "tile", "knob"}),
                               ("h100_128x1_b64", ["FUSED"], {"baseline", "tile", "knob"}),
                               ("a100", tune.ROLES, {"baseline", "tile", "knob"}),
                               ("rtx2060", tune.ROLES, {"baseline", "tile", "knob"})]:
        board = tune.Board(name)
        cands = tune.enumerate_candidates(board)
        tiles = [c for c in cands if c.kind == "tile"]
        knobs = {c.role for c in cands if c.kind == "knob"}
        ok = (cands[0].kind == "baseline" and not cands[0].values and {c.kind for c in cands} == kinds and
              all(set(c.values) == {f"GEMM_{r}_{f}" for r in roles for f in tune.TILE_FIELDS} for c in tiles) and
              all(any(board.baseline[s] != v for s, v in c.values.items()) for c in cands[1:]))
        verdict(ok, f"{name}: the baseline first, each tile for the roles {'/'.join(roles)}, each change a change",
                str([(c.kind, c.name) for c in cands]))
        sm90 = name.startswith("h100")
        want = {"GEMM_WGMMA_BLOCK"} <= knobs if sm90 and not board.fused else "GEMM_WGMMA_BLOCK" not in knobs
        fused_knobs = {"FUSED_BLOCKS", "FUSED_SLICE_KTILES", "FUSED_CLUSTER_THREADS", "FUSED_GRID_RESIDENT_THREADS",
                       "FUSED_GRID_RESIDENT_SPLIT", "GEMM_STAGES", "STEP", "FUSED_CLUSTER", "FUSED_GRID_RESIDENT"}
        want = want and (knobs <= fused_knobs) == board.fused
        fused = ({"FUSED_BLOCKS", "FUSED_SLICE_KTILES"} <= knobs) == board.fused
        # the resident step's threads where the board builds it: Hopper, 16-bit operands, hidden layers
        fused = fused and ("FUSED_CLUSTER_THREADS" in knobs) == (board.fused and sm90)
        # the grid-resident step's threads where it is built: sm80 or sm90, 16-bit operands, hidden layers
        gr = board.fused and board.precision in ("BF16", "FP16") and (sm90 or name.startswith("a100"))
        fused = fused and ("FUSED_GRID_RESIDENT_THREADS" in knobs) == gr
        # and its split of layer 0's inputs where the model has one hidden layer
        fused = fused and ("FUSED_GRID_RESIDENT_SPLIT" in knobs) == (gr and board.value("NN_HIDDEN_LAYERS") == "1")
        # the bias gradients' blocks where the layered step's bias kernel runs
        fused = fused and ("CUDA_BIAS" in knobs) == (not board.fused)
        verdict(want and fused, f"{name}: the knobs its target has", str(sorted(knobs)))
    precisions = {b: tune.Board(b).precision for b in ("a100", "h100_2048x3_b256", "rtx2060")}
    verdict(precisions == {"a100": "BF16", "h100_2048x3_b256": "BF16", "rtx2060": "FP16_ACC16"},
            "the precision the tuner reports: the board's", str(precisions))
    board = tune.Board("rtx2060")
    stages = [c for c in tune.enumerate_candidates(board) if c.role == "GEMM_STAGES"]
    tune.kconfig_check(board, stages)
    verdict(stages and all("CONFIG_GEMM_STAGES" in c.refused and "range 2..2" in c.refused for c in stages),
            "rtx2060: Kconfig refuses every other stage count (Turing has no cp.async)",
            str([c.refused for c in stages]))
    board = tune.Board("h100_128x1_b64")
    fused_tiles = [c for c in tune.enumerate_candidates(board) if c.kind == "tile"]
    verdict(all(tuple(int(c.values[f"GEMM_FUSED_{f}"]) for f in tune.TILE_FIELDS) in tune.TENSOR_TILES for c in fused_tiles),
            "a BF16 build tries the tensor-core tiles", "")


def check_refusals(work):
    board = tune.Board("h100_2048x3_b256")
    bad_range = tune.Candidate("warp k 256", "tile", tune.tile_values(tune.ROLES, (64, 64, 256, 32, 32, 256)))
    bad_dep = tune.Candidate("fused blocks", "knob", {"FUSED_BLOCKS": "66"})
    bad_mma = tune.Candidate("warp m 8", "tile", tune.tile_values(tune.ROLES, (32, 32, 32, 8, 16, 32)))
    bad_warps = tune.Candidate("64 warps", "tile", tune.tile_values(tune.ROLES, (256, 256, 16, 16, 16, 16)))
    bad_smem = tune.Candidate("wgmma stages 8", "knob", {"GEMM_WGMMA_STAGES": "8"})
    bad_pingpong = tune.Candidate("ping-pong 128x256", "knob", {"GEMM_WGMMA_PINGPONG": "y"})
    good = tune.Candidate("good", "tile", tune.tile_values(tune.ROLES, (64, 64, 32, 32, 32, 32)))
    good_pingpong = tune.Candidate("ping-pong 128x128", "knob",
                                   {"GEMM_WGMMA_PINGPONG": "y", "GEMM_WGMMA_BLOCK_N": "128"})
    bad_wgrad = tune.Candidate("both ping-pongs", "knob", {"GEMM_WGMMA_WGRAD_PINGPONG": "y",
                                                             "GEMM_WGMMA_PINGPONG": "y", "GEMM_WGMMA_BLOCK_N": "128"})
    good_wgrad = tune.Candidate("weight gradient ping-pong, inputs 2 ahead", "knob",
                                {"GEMM_WGMMA_WGRAD_PINGPONG": "y", "GEMM_WGMMA_EPI_STAGES": "2"})
    cands = [bad_range, bad_dep, bad_mma, bad_warps, bad_smem, bad_pingpong, good, good_pingpong, bad_wgrad,
             good_wgrad]
    tune.kconfig_check(board, cands)
    verdict(bad_wgrad.refused and "CONFIG_GEMM_WGMMA_WGRAD_PINGPONG" in bad_wgrad.refused,
            "Kconfig refuses the weight gradient's own ping-pong beside the all-roles one", str(bad_wgrad.refused))
    verdict(bad_range.refused and "CONFIG_GEMM_FWD_WARP_K=256 is outside its range" in bad_range.refused,
            "Kconfig refuses a value outside its range, naming it", str(bad_range.refused))
    verdict(bad_dep.refused and "CONFIG_FUSED_BLOCKS" in bad_dep.refused and "depends on" in bad_dep.refused,
            "Kconfig refuses a value whose dependencies fail", str(bad_dep.refused))
    if not have_nvcc("the tile checks"):
        return
    tune.compile_check(board, cands, work, 2)
    verdict(bad_mma.refused and "WARP_M must be a multiple of the tensor-core instruction's M" in bad_mma.refused,
            "the tile check refuses a warp tile the mma shape does not divide", str(bad_mma.refused))
    verdict(bad_warps.refused and "1024 threads" in bad_warps.refused, "the tile check refuses 64 warps a block",
            str(bad_warps.refused))
    verdict(bad_smem.refused and "wgmma GEMM shared memory" in bad_smem.refused,
            "the tile check refuses a wgmma ring that does not fit", str(bad_smem.refused))
    verdict(bad_pingpong.refused and "do not fit in a consumer's registers" in bad_pingpong.refused,
            "the tile check refuses a ping-pong 128x256 block (each consumer would hold the whole tile)",
            str(bad_pingpong.refused))
    verdict(good.refused is None and good_pingpong.refused is None and good_wgrad.refused is None,
            "a valid tile, a ping-pong 128x128 block and the weight gradient's own ping-pong pass both checks",
            f"{good.refused} {good_pingpong.refused} {good_wgrad.refused}")


def have_nvcc(what):
    """True if nvcc is here; else a skip line (a failure on CI, which must have it)."""
    try:
        tune.nvcc()
        return True
    except tune.Refusal as e:
        if os.environ.get("CI") == "true":
            verdict(False, what, f"CI has no nvcc: {e}")
        else:
            print(f"skip - tune: {what}: skipped: {e}")
        return False


def timed(name, kind, values, times, role=None):
    c = tune.Candidate(name, kind, values, role)
    c.times = times
    return c


def check_choice():
    board = tune.Board("h100_2048x3_b256")
    t = lambda f, d, w: {"FWD": f, "DGRAD": d, "WGRAD": w, "FWD tile": f, "DGRAD tile": d, "WGRAD tile": w,  # noqa: E731
                         "total": f + d + w}
    small = (32, 64, 32, 16, 32, 32)
    base = timed("baseline", "baseline", {}, t(1.0, 1.0, 1.0))
    tile = timed("tile", "tile", tune.tile_values(tune.ROLES, small), t(0.90, 0.99, 1.2))
    knob = timed("stages", "knob", {"GEMM_WGMMA_STAGES": "3"}, t(1.0, 1.0, 0.9), role="GEMM_WGMMA_STAGES")
    slow = timed("split", "knob", {"GEMM_SPLIT_K_MAX": "1"}, t(1.0, 1.0, 1.5), role="GEMM_SPLIT_K_MAX")
    values, why = tune.choose(board, [base, tile, knob, slow])
    want = dict(tune.tile_values(["FWD"], small), GEMM_WGMMA_STAGES="3")
    verdict(values == want, "each role takes the tile that gains >= 2 % on it (FWD, not DGRAD at 1 %), "
            "each knob its value that gains on the step", f"{values} {why}")
    combined = timed("together", "combined", values, t(0.9, 1.0, 0.9))
    chosen, reason = tune.final_choice([base, tile, knob, slow], combined)
    verdict(chosen is combined, "the combination is kept when it beats the board", reason)
    combined.times = t(1.0, 1.0, 1.1)
    chosen, reason = tune.final_choice([base, tile, knob, slow], combined)
    verdict(chosen is knob and "best single" in reason,
            "else the best single candidate that beats the board", f"{chosen.name}: {reason}")
    chosen, reason = tune.final_choice([base, slow], None)
    verdict(chosen is base and "hand-made" in reason, "else the board's own values", reason)
    combined.times = t(0.95, 1.0, 0.95)
    knob.times = t(0.9, 0.9, 0.9)
    chosen, reason = tune.final_choice([base, tile, knob, slow], combined)
    verdict(chosen is knob, "a single candidate faster than the combination is taken instead", reason)
    chosen, reason = tune.final_choice([base, tune.Candidate("untimed", "knob", {"GEMM_STAGES": "3"})], None)
    verdict(chosen is base and "no candidate was timed" in reason, "nothing timed: the board, saying so", reason)
    wpp = timed("wgrad ping-pong", "knob", {"GEMM_WGMMA_WGRAD_PINGPONG": "y", "GEMM_WGMMA_EPI_STAGES": "1"},
                t(1.0, 1.0, 0.8), role="GEMM_WGMMA_WGRAD_PINGPONG")
    pp = timed("ping-pong", "knob", {"GEMM_WGMMA_PINGPONG": "y", "GEMM_WGMMA_BLOCK_M": "128",
                                     "GEMM_WGMMA_BLOCK_N": "128"}, t(0.9, 0.9, 0.9), role="GEMM_WGMMA_PINGPONG")
    values, why = tune.choose(board, [base, wpp, pp])
    verdict(values == pp.values and any(w.startswith("wgrad ping-pong") and "not with the changes above" in w
                                        for w in why),
            "of two changes Kconfig refuses together (the two ping-pong schedules), the faster is combined",
            f"{values} {why}")
    calls, step_us, kernel = tune.parse_bench_step(
        "| call | ms | share |\n|---|---|---|\n| gather_batch | 0.0030 | 1.0 % |\n"
        "| linear_forward 256x2048x784 [wgmma] | 0.0200 | 20.0 % |\n"
        "| linear_backward_weight_update 2048x784x256 [mma.sync, twins] [split-K 2] | 0.0500 | 50.0 % |\n"
        "| sum | 0.0730 | |\n\n# the step as ./app/mnist runs it on NVIDIA H100 80GB HBM3 (a CUDA graph replay "
        "each): 234 steps, 61.25 us per step (median of 5 runs)\n")
    times = tune.step_times(calls, step_us)
    verdict(len(calls) == 3 and kernel is None and times["FWD"] == 0.02 and times["WGRAD"] == 0.05 and
            times["FWD tile"] == 0 and times["WGRAD tile"] == 0.05 and times["total"] == 61.25,
            "bench_step's rows give each role's time and its time on the tile (not wgmma); the graph-replayed "
            "step the step's", f"{calls} {times}")
    base.times = dict(t(1.0, 1.0, 1.0), **{"FWD tile": 0.0})
    values, why = tune.choose(board, [base, tile])
    verdict(not values and "all on wgmma" in why[0], "a role whose GEMMs all run on wgmma keeps the board's tile",
            f"{values} {why}")
    calls, step_us, kernel = tune.parse_bench_step(
        "\n# the fused step on NVIDIA H100 80GB HBM3: one cluster of 16 blocks\n# the fused kernel: cluster\n"
        "# 400 steps in one launch: 17.80 us per step (median of 5 launches)\n")
    verdict(step_us == 17.8 and kernel == "cluster" and tune.step_times(calls, step_us)["total"] == 17.8,
            "a fused build's step time and kernel", f"{step_us} {kernel}")
    calls, step_us, kernel = tune.parse_bench_step("| gather_batch | 0.0030 | 1.0 % |\n")
    verdict(step_us is None, "no step time when bench_step printed none (the candidate is refused)", str(step_us))


def check_step(work):
    """The other step as a candidate: offered, set cleanly, judged alone; a fused kernel's own candidates."""
    fused = tune.Board("h100_128x1_b64")
    cands = tune.enumerate_candidates(fused)
    tune.kconfig_check(fused, cands)
    layered = next((c for c in cands if c.values == {"STEP_LAYERED": "y"}), None)
    off = next((c for c in cands if c.values == {"FUSED_CLUSTER": "n"}), None)
    verdict(layered and not layered.refused and layered.fused is False and cands[0].fused is True and
            off and not off.refused and off.fused is True,
            "a fused board tries the layered step and its fused kernels turned off, Kconfig accepting both",
            f"{layered and layered.refused} {off and off.refused}")
    offered = {b: any(c.values == {"STEP_FUSED": "y"} for c in tune.enumerate_candidates(tune.Board(b)))
               for b in ("a100", "rtx2060", "h100_2048x3_b256", "h100_8192x3_b32")}
    verdict(offered == {"a100": True, "rtx2060": True, "h100_2048x3_b256": False, "h100_8192x3_b32": False},
            "a layered board tries the fused step where its weights and momentum fit an H100's shared memory "
            "(784-256-10, not 784-2048x3-10)", str(offered))
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "step_defconfig")
    fused.write_min_config(layered.values, path, "# a test\n")
    with open(path) as f:
        text = f.read()
    o = os.path.join(work, "step")
    p = subprocess.run(["make", "--no-print-directory", f"O={o}", "defconfig", f"DEFCONFIG={path}"], cwd=REPO,
                       capture_output=True, text=True)
    with open(os.path.join(o, ".config")) as f:
        config = f.read()
    verdict(p.returncode == 0 and "CONFIG_STEP_LAYERED=y" in text and "STEP_FUSED" not in text and
            "CONFIG_STEP_LAYERED=y" in config and "# CONFIG_STEP_FUSED is not set" in config,
            "the layered step's defconfig sets the choice alone and configures", text + p.stderr[-400:])
    reads = {k: sorted(c.name for c in cands[1:] if tune.reads(k, c) and c.kind != "tile")
             for k in tune.KERNEL_READS}
    tiles = {k: any(tune.reads(k, c) for c in cands if c.kind == "tile") for k in tune.KERNEL_READS}
    verdict(reads["grid-resident"] == ["CONFIG_FUSED_GRID_RESIDENT=n", "CONFIG_FUSED_GRID_RESIDENT_SPLIT=2",
                                       "CONFIG_FUSED_GRID_RESIDENT_SPLIT=4", "CONFIG_FUSED_GRID_RESIDENT_THREADS=1024",
                                       "CONFIG_FUSED_GRID_RESIDENT_THREADS=256", "CONFIG_STEP_LAYERED=y"] and
            "CONFIG_FUSED_CLUSTER_THREADS=512" in reads["cluster"] and "CONFIG_FUSED_CLUSTER=n" in reads["cluster"]
            and "CONFIG_FUSED_BLOCKS=264" not in reads["cluster"] and
            "CONFIG_FUSED_BLOCKS=264" in reads["grid-wide"] and
            tiles == {"grid-wide": True, "cluster": False, "grid-resident": False},
            "each fused kernel is timed only with the candidates it reads (the step, its own switch, its knobs)",
            f"{reads} {tiles}")
    t = lambda x: {r: 0.0 for r in tune.ROLES} | {r + " tile": 0.0 for r in tune.ROLES} | {"total": x}  # noqa: E731
    base = timed("baseline", "baseline", {}, t(10.0))
    other = timed("layered", "knob", {"STEP_LAYERED": "y"}, t(8.0), role="STEP")
    threads = timed("threads", "knob", {"FUSED_CLUSTER_THREADS": "512"}, t(7.0), role="FUSED_CLUSTER_THREADS")
    values, why = tune.choose(fused, [base, other, threads])
    verdict(values == {"FUSED_CLUSTER_THREADS": "512"},
            "the other step is not taken where a candidate of the board's own step beats it", f"{values} {why}")
    threads.times = t(9.0)
    values, why = tune.choose(fused, [base, other, threads])
    verdict(values == {"STEP_LAYERED": "y"} and "taken alone" in why[0],
            "the other step is taken alone where it beats every candidate", f"{values} {why}")


def check_written_board_builds(work):
    board = tune.Board("a100")
    values = dict(tune.tile_values(["WGRAD"], (64, 128, 32, 32, 64, 32)), GEMM_STAGES="4")
    path = os.path.join(work, "a100_tuned_defconfig")
    board.write_min_config(values, path, "# Generated by 'make tune BOARD=a100' (a test)\n")
    with open(path) as f:
        text = f.read()
    verdict(text.startswith("# Generated by") and "CONFIG_GEMM_WGRAD_BLOCK_N=128" in text and
            "CONFIG_GEMM_STAGES=4" in text and "CONFIG_GEMM_FWD_BLOCK_M" not in text,
            "the tuned defconfig: a generated-by line, then only what differs from the target's defaults", text)
    o = os.path.join(work, "a100-tuned")
    p = subprocess.run(["make", "--no-print-directory", f"O={o}", "defconfig", f"DEFCONFIG={path}"], cwd=REPO,
                       capture_output=True, text=True)
    if p.returncode == 0:
        p = subprocess.run(["make", "--no-print-directory", f"O={o}", f"-j{os.cpu_count()}", f"{o}/app/mnist"],
                           cwd=REPO, capture_output=True, text=True)
    verdict(p.returncode == 0, "the defconfig it writes configures and builds (a100 with a tuned tile and stages)",
            (p.stdout + p.stderr)[-600:])


def check_outputs(work):
    """A tuned defconfig only where the choice changes the board; the report either way."""
    board = tune.Board("h100_2048x3_b256")
    t = {r: 1.0 for r in tune.ROLES} | {r + " tile": 1.0 for r in tune.ROLES} | {"total": 100.0}
    base = timed("baseline", "baseline", {}, t)
    faster = timed("stages", "knob", {"GEMM_WGMMA_STAGES": "3"}, dict(t, total=90.0), role="GEMM_WGMMA_STAGES")
    own = {"GEMM_WGMMA_STAGES": board.value("GEMM_WGMMA_STAGES")}
    verdict(board.unchanged_by({}) and board.unchanged_by(own) and not board.unchanged_by(faster.values),
            "the board is unchanged by no values and by its own, changed by another", "")
    configs, tuned = os.path.join(work, "configs"), os.path.join(work, "configs", "h100_2048x3_b256_tuned_defconfig")
    os.makedirs(configs, exist_ok=True)
    chosen, reason = tune.final_choice([base, timed("slow", "knob", {"GEMM_STAGES": "3"}, dict(t, total=120.0))],
                                       None)
    kept = board.unchanged_by(chosen.values)
    text = tune.report(board, [base], None, chosen, [], reason, kept, "a GPU", 60, 1.0)
    with open(tuned, "w") as f:
        f.write("# Generated by 'make tune BOARD=h100_2048x3_b256' (an earlier run)\nCONFIG_GEMM_WGMMA_STAGES=3\n")
    done = tune.write_outputs(board, chosen, base, text, kept, "a GPU", root=work)
    with open(os.path.join(work, "docs", "tune", "h100_2048x3_b256.md")) as f:
        written = f.read()
    verdict(kept and not os.path.exists(tuned) and "removed the earlier run's" in done and
            "nothing beat the board" in written and "The board is kept: no `configs/h100_2048x3_b256_tuned_defconfig`"
            in written, "no _tuned file when nothing beats the board: the earlier run's removed, the report says why",
            f"{done}; {written[-300:]}")
    with open(tuned, "w") as f:
        f.write("CONFIG_GEMM_WGMMA_STAGES=3\n")
    done = tune.write_outputs(board, chosen, base, text, kept, "a GPU", root=work)
    verdict(os.path.exists(tuned) and "removed" not in done,
            "a tuned file the tuner did not write (no generated-by line) is left alone", done)
    os.remove(tuned)
    done = tune.write_outputs(board, faster, base, "a report\n", board.unchanged_by(faster.values), "a GPU",
                              root=work)
    with open(tuned) as f:
        text = f.read()
    verdict(done.startswith("wrote configs/h100_2048x3_b256_tuned_defconfig") and
            text.startswith("# Generated by 'make tune BOARD=h100_2048x3_b256'") and
            "CONFIG_GEMM_WGMMA_STAGES=3" in text and "step 100 -> 90" in text,
            "a choice that changes the board is written, with its generated-by line", f"{done}: {text}")


def check_parallel_builds(work):
    """Each candidate's defconfig holds its own values when the builds run in threads (their Kconfig is one
    object: configured one at a time, before the threads)."""
    board = tune.Board("h100_2048x3_b256")
    cands = tune.enumerate_candidates(board)
    tune.kconfig_check(board, cands)
    stubs = tune.compile_configured, tune.measure, tune.say
    tune.compile_configured = lambda c, d: time.sleep(0.01)
    tune.measure = lambda board, c, d, gpu=None: None
    tune.say = lambda text: None
    try:
        tune.build_and_measure(board, cands, work, 8, time.monotonic() + 1000, [])
    finally:
        tune.compile_configured, tune.measure, tune.say = stubs
    wrong = []
    for i, c in enumerate(cands):
        ref = os.path.join(work, f"ref{i:02d}")
        board.write_min_config(c.values, ref, header="")
        with open(ref) as f, open(os.path.join(tune.candidate_dir(work, i), "def")) as g:
            if c.refused or f.read() != g.read():
                wrong.append(c.name)
    verdict(not wrong, f"{len(cands)} candidates built in 8 threads, each from a defconfig of its own values",
            ", ".join(wrong))


def check_gpu_spread(work):
    """With two GPUs, the second 10 % slower: the baseline timed on both, the candidates one a GPU at a time
    on both, each candidate's times scaled by its GPU's baseline, so only the one planted 10 % faster gains."""
    board = tune.Board("h100_2048x3_b256")
    cands = tune.enumerate_candidates(board)
    tune.kconfig_check(board, cands)
    speed, busy, log, lock = {"0": 1.0, "1": 1.1}, set(), [], threading.Lock()
    good = next(c for c in cands[1:] if not c.refused)

    def fake_measure(board, c, d, gpu=None):
        with lock:
            clash = gpu in busy
            busy.add(gpu)
        time.sleep(0.02)
        c.gpu = gpu
        c.times = {"total": 10.0 * speed[gpu] * (0.9 if c is good else 1.0)}
        with lock:
            busy.discard(gpu)
            log.append((c.name, gpu, clash))

    stubs = tune.build, tune.compile_configured, tune.measure, tune.say
    tune.build = lambda board, c, d: None
    tune.compile_configured = lambda c, d: None
    tune.measure, tune.say = fake_measure, lambda text: None
    try:
        tune.build_and_measure(board, cands, work, 8, time.monotonic() + 1000, ["0", "1"])
    finally:
        tune.build, tune.compile_configured, tune.measure, tune.say = stubs
    timed = [c for c in cands[1:] if c.times]
    base_on = sorted(g for name, g, _ in log if name == cands[0].name)
    ok = (base_on == ["0", "1"] and not any(clash for _, _, clash in log) and {c.gpu for c in timed} == {"0", "1"}
          and all(abs(c.times["total"] - (9.0 if c is good else 10.0)) < 1e-9 for c in timed))
    verdict(ok, f"two GPUs: the baseline timed on each, {len(timed)} candidates spread one a GPU, their times "
            "scaled by their GPU's baseline", str([(c.name, c.gpu, c.times) for c in timed][:4]) + str(base_on))


def main():
    work = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build", "test", "tune"))
    os.makedirs(work, exist_ok=True)
    check_enumeration()
    check_refusals(os.path.join(work, "checks"))
    check_choice()
    check_step(os.path.join(work, "step"))
    check_outputs(os.path.join(work, "outputs"))
    check_parallel_builds(os.path.join(work, "parallel"))
    check_gpu_spread(os.path.join(work, "gpus"))
    if have_nvcc("the written defconfig builds"):
        check_written_board_builds(work)


if __name__ == "__main__":
    main()
