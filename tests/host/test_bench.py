#!/usr/bin/env python3
"""tools/bench.py without a GPU: the layered twin of a board's defconfig (and
that every board's configures), the step and the floor a log and a result
give its table row."""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import bench  # noqa: E402


def verdict(ok, name, why=""):
    print(f"ok - bench: {name}" if ok else f"not ok - bench: {name}: {why}")


def engine_log(step, ms, reserved=None):
    lines = [{"event": "config", "device": "NVIDIA H100 80GB HBM3", "step": step}]
    lines += [{"event": "epoch", "epoch": i + 1, "ms": m, "test_acc": 0.98, "test_loss": 0.07, "train_loss": 0.05}
              for i, m in enumerate(ms)]
    if reserved:
        lines.append({"event": "memory", "strategy": "static", "reserved_bytes": reserved})
    return "".join(json.dumps(e) + "\n" for e in lines)


def main():
    text = bench.layered_defconfig("CONFIG_TARGET_SM90=y\nCONFIG_STEP_FUSED=y\nCONFIG_FUSED_CLUSTER_THREADS=384\n"
                                   "CONFIG_NN_HIDDEN_WIDTH=128\n")
    verdict(text == "CONFIG_TARGET_SM90=y\nCONFIG_NN_HIDDEN_WIDTH=128\nCONFIG_STEP_LAYERED=y\n",
            "the layered twin drops the board's step and its fused kernels' settings, and forces "
            "CONFIG_STEP_LAYERED", repr(text))
    refused = []
    with tempfile.TemporaryDirectory() as work:
        for board in sorted(glob.glob(os.path.join(bench.REPO, "configs", "*_defconfig"))):
            with open(board) as f:
                text = f.read()
            name = os.path.basename(board)[:-len("_defconfig")]
            subprocess.run(["make", "--no-print-directory", f"O={work}/b", f"{name}_defconfig"], cwd=bench.REPO,
                           capture_output=True)
            with open(os.path.join(work, "b", ".config")) as f:
                if "CONFIG_TARGET_CUDA=y" not in f.read():
                    continue  # the host engine has one step
            def_path = os.path.join(work, "def")
            with open(def_path, "w") as f:
                f.write(bench.layered_defconfig(text))
            p = subprocess.run(["make", "--no-print-directory", f"O={work}/o", "defconfig", f"DEFCONFIG={def_path}"],
                               cwd=bench.REPO, capture_output=True, text=True)
            if p.returncode:
                refused.append(f"{os.path.basename(board)}: {p.stderr.strip()[-200:]}")
    verdict(not refused, "every GPU board's layered twin configures (bench.py --layered, bench_mm.py)",
            "; ".join(refused))
    fused = bench.read_engine_log(engine_log("fused", [30.0, 16.0, 16.2, 16.1]))
    layered = bench.read_engine_log(engine_log("layered", [40.0, 23.0, 23.0]))
    verdict(fused["step"] == "fused" and fused["ms_median"] == 16.1, "a log's step and median after the first epoch",
            str(fused))
    legacy = bench.read_engine_log(json.dumps({"event": "epoch", "epoch": 1, "ms": 5.0, "test_acc": 0.9,
                                               "test_loss": 0.1, "train_loss": 0.1}) + "\n")
    verdict(legacy["step"] == "layered", "a log without a step (older builds) reads as layered", str(legacy))
    shape = {"dims": [784, 128, 10], "batch": 64, "precision": "bf16"}
    row = bench.table_row("h100_128x1_b64", {"shape": shape, "staticnn": fused, "layered": layered,
                                             "floor_ms": 2.81})
    want_tail = ["fused", "23.00 (98.00%)", "1.43x", "2.81 (0.17)"]
    verdict(row[-6:-2] == want_tail, "the row's step, layered, ratio and floor cells", str(row[-6:-2]))
    row = bench.table_row("h100_8192x3_b32", {"shape": shape, "staticnn": layered})
    verdict(row[-6:] == ["layered", "-", "-", "-", "-", "-"], "a layered board has no twin, floor or memory cells",
            str(row[-6:]))

    mib = bench.MIB
    ours = bench.read_engine_log(engine_log("layered", [40.0, 23.0], reserved=300 * mib))
    torch = {"eager": {"ok": True, "ms_median": 50.0, "max_memory_bytes": 420 * mib},
             "compile": {"ok": False, "ms_median": None, "max_memory_bytes": 100 * mib},
             "graph": {"ok": True, "ms_median": 40.0, "max_memory_bytes": 450 * mib}}
    row = bench.table_row("h100_2048x3_b256", {"shape": shape, "staticnn": ours, "torch": torch})
    verdict(row[-2:] == ["300", "420 (eager; 1.40x)"],
            "memory cells: staticnn's reserved bytes against the least peak of the modes that trained", str(row[-2:]))

    sets = bench.bench_boards.SETS
    verdict(set(sets) == {"benchmark", "throughput"} and "h100_128x1_b64" in sets["benchmark"] and
            "h100_16384x2_b2048" in sets["throughput"], "the board sets", str(sets))
    for board in sets["benchmark"] + sets["throughput"]:
        if not os.path.exists(os.path.join(bench.REPO, "configs", f"{board}_defconfig")):
            verdict(False, f"board {board} of a set has a defconfig", "missing")
            break
    else:
        verdict(True, "every board of the sets has a defconfig")


if __name__ == "__main__":
    main()
