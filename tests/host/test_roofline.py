#!/usr/bin/env python3
"""tools/roofline.py: the floors issues 20 and 23 quote, FLOPs by hand, the
fraction from a fake log, data parallelism's predicted speed-up (issue 44's
figures), and its refusals (one line, exit 1)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "roofline.py")
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "lib"))
import allreduce  # noqa: E402


def verdict(ok, name, why=""):
    print(f"ok - roofline: {name}" if ok else f"not ok - roofline: {name}: {why}")


def roofline(*args):
    p = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def rows(*args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rows.json")
        rc, _, err = roofline(*args, "--json", out)
        return json.load(open(out)) if rc == 0 else err


def test_widths():
    path = os.path.join(HERE, "..", "configs", "recipe_widths_defconfig")
    got = rows("--board", path)
    r = got[0] if isinstance(got, list) else {}
    ok = r.get("dims") == [784, 300, 37, 100, 10] and r.get("shape") == "784-300-37-100-10" and r.get("batch") == 17
    verdict(ok, "a defconfig of mixed hidden widths (NN_HIDDEN_WIDTH_k) by its path: each layer its own", r)


def test_quoted_floors():
    quoted = {"h100_128x1_b64": 2.8, "h100_128x3_b32": 9.4, "h100_784x4_b64": 8.5, "h100_1024x3_b32": 40}
    got = rows(*[a for b in quoted for a in ("--board", b)])
    ms = {r["board"]: r["floor_ms_epoch"] for r in got} if isinstance(got, list) else got
    ok = isinstance(ms, dict) and all(abs(ms[b] / q - 1) <= 0.10 for b, q in quoted.items())
    verdict(ok, "issue 20's floors per epoch, within 10 %", ms)
    got = rows("--board", "h100_8192x3_b32")
    r = got[0] if isinstance(got, list) else {}
    ok = r.get("binding") == "memory" and not r["fits_l2"] and abs(r["floor_ms_epoch"] / 1935 - 1) <= 0.05
    verdict(ok, "issue 23's memory floor of 784-8192x3-10 b32, 1935 ms within 5 %", r)


def test_tiny_shape():
    # 4-3-2, b5: forward 2*5*(12+6) = 180, weight gradient 180, input gradient of layer 2 only 2*5*6 = 60
    got = rows("--shape", "4-3-2", "--batch", "5")
    r = got[0] if isinstance(got, list) else {}
    ok = (r.get("gflop_step") == 420e-9 and r["steps"] == 12000 and r["dims"] == [4, 3, 2]
          and abs(r["mb_step"] - (12 * 20 + 6 * 22 + 16 * 5) / 1e6) < 1e-12 and r["binding"] == "latency"
          and r["floor_us"]["latency"] == 3.0)
    verdict(ok, "a tiny shape: FLOPs, bytes, steps and phases by hand", r)
    r = rows("--shape", "784-128x3-10", "--batch", "32", "--precision", "fp32")
    ok = isinstance(r, list) and r[0]["shape"] == "784-128x3-10" and r[0]["dims"] == [784, 128, 128, 128, 10]
    verdict(ok, "a shape's label run-length codes the hidden widths", r)


def test_log():
    events = [{"event": "config", "shape": "784-128-128-128-10", "batch": 32, "precision": "bf16"}]
    events += [{"event": "epoch", "epoch": i + 1, "ms": ms} for i, ms in enumerate([500, 20, 18.75, 19])]
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "run.jsonl")
        with open(log, "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in events)
        got = rows("--log", log)
        rc, out, _ = roofline("--log", log)
        r = got[0] if isinstance(got, list) else {}
        ok = (r.get("measured_ms") == 19 and abs(r["fraction"] - r["floor_ms_epoch"] / 19) < 1e-12
              and rc == 0 and f"| {r['fraction']:.3f} |" in out)
        verdict(ok, "a --log's median epoch after the first, and floor / measured", (r, out))
        two = rows("--log", log, log)
        verdict(isinstance(two, list) and len(two) == 2, "--log takes several files, a row each", two)

        with open(log, "w") as f:
            f.write(json.dumps(events[0]) + "\n")
        refusals = {"a log without epochs": ["--log", log], "an unknown board": ["--board", "nope"],
                    "a bad shape": ["--shape", "784-x-10", "--batch", "8"], "--shape without --batch":
                    ["--shape", "784-10"], "--ms without one row": ["--ms", "3"], "a zero batch":
                    ["--shape", "784-10", "--batch", "0"], "a missing log": ["--log", os.path.join(d, "none")],
                    "--gpus 1": ["--board", "h100", "--gpus", "1"], "an unknown --gpu": ["--gpu", "a100"]}
        for name, args in refusals.items():
            rc, out, err = roofline(*args)
            ok = rc == 1 and not out and len(err.splitlines()) == 1 and err.startswith("roofline: error: ")
            verdict(ok, f"{name} is refused in one line", (rc, out, err))


def test_data_parallel():
    table = allreduce.MEASURED_2GPU
    ok = (all(allreduce.allreduce_us(b, 2) == t for b, t in table) and allreduce.allreduce_us(1, 2) == table[0][1]
          and allreduce.allreduce_us(1 << 30, 1) == 0.0
          and abs(allreduce.allreduce_us((1 << 20) + (15 << 19), 2) - 65.0) < 1e-9  # halfway from 1 to 16 MB
          and abs(allreduce.allreduce_us(512 << 20, 2) - (893 + (893 - 249) * 256 / 192)) < 1e-9  # past the end
          and allreduce.allreduce_us(64 << 20, 4) == allreduce.allreduce_us(96 << 20, 2))
    verdict(ok, "the all-reduce table: its points, linear between and past the end, the first below, 1 GPU none, "
            "4 GPUs' ring moves 1.5x the bytes")
    # issue 44: 784-16384x2 b2048, 6.1 ms a step, a 562 MB BF16 gradient, about 1.9 ms to all-reduce on 2 GPUs
    params = 784 * 16384 + 16384 + 16384 * 16384 + 16384 + 16384 * 10 + 10
    ar = allreduce.allreduce_us(params * 2, 2)
    plain, hidden = allreduce.speedup(6100.0, params * 2, 2)
    small = allreduce.speedup(7.4, (784 * 128 + 128 + 1290) * 2, 2)
    ok = 1800 < ar < 2100 and 1.2 < plain < 1.3 and abs(hidden - 2.0) < 0.01 and max(small) < 0.2
    verdict(ok, f"issue 44's boards: 784-16384x2 b2048 all-reduces in {ar / 1e3:.2f} ms, {plain:.2f}x without "
            f"overlap, {hidden:.2f}x overlapped; 784-128-10 b64 at most {max(small):.2f}x", (ar, plain, hidden, small))
    got = rows("--shape", "784-16384x2-10", "--batch", "2048", "--ms", "178.7", "--gpus", "2")
    r = got[0] if isinstance(got, list) else {}
    ok = (r and abs(r["grad_mb"] - params * 2 / 1e6) < 1e-6 and abs(r["dp_speedup"][1] - 2.0) < 0.02
          and abs(r["dp_engine"] - 0.91) < 0.03)
    verdict(ok, "roofline.py's row: the gradient's MB and the predicted speed-ups from the measured step, ideal and "
            "as built", r)
    # the engine's step as built (docs/PERF.md v45, 2 x H200): one GPU 177.9 ms an epoch, two 150.6; the
    # model, counting the all-reduce and the update whole, is pessimistic there
    update = allreduce.update_us(params, "bf16", 1)
    engine = allreduce.engine_speedup(6134.0, params * 2, 2, update)
    ok = abs(update - params * 20 / 3e6) < 1e-6 and abs(engine - 0.90) < 0.02 and engine < 177.9 / 150.6
    verdict(ok, f"the engine's data-parallel step as built: an update pass of {update / 1e3:.2f} ms, {engine:.2f}x "
            f"on 2 GPUs, below the measured {177.9 / 150.6:.2f}x", (update, engine))


def test_gpu():
    h100, h200 = rows("--board", "h100_1024x3_b32"), rows("--board", "h100_1024x3_b32", "--gpu", "h200")
    mine = rows("--board", "h100_1024x3_b32", "--gpu", "h200", "--l2-mb", "50", "--hbm-tbps", "3.0")
    ms = [r[0]["floor_ms_epoch"] if isinstance(r, list) else r for r in (h100, h200, mine)]
    # 784-1024x3-10 b32's state fits in half of the H200's 60 MB of L2, not in half of the H100's 50
    ok = all(isinstance(m, float) for m in ms) and ms[1] < 0.6 * ms[0] and ms[2] == ms[0]
    verdict(ok, "--gpu h200 lowers 784-1024x3-10 b32's memory floor (L2 60 MB, HBM 4.3 TB/s); the rate options "
            "override it", ms)


test_widths()
test_quoted_floors()
test_gpu()
test_tiny_shape()
test_log()
test_data_parallel()
