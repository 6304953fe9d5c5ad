#!/usr/bin/env python3
"""Independent runs over the host's GPUs (tools/lib/gpu_pool.py), and time_to_acc.py's seeds, sweep.py's
boards x seeds and committee.py's members spread over them, on any machine: the GPUs are named by CUDA_VISIBLE_DEVICES and the runs are
scripts that report the device they were given and the time they held it, or the host engine's builds.

    tests/host/test_gpu_pool.py HOST/mnist VALIDATION/mnist
      (configs/host_defconfig; tests/configs/validation_defconfig)
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools", "lib"))
import gpu_pool  # noqa: E402
import recipe_grid  # noqa: E402

HOLD = 1.0  # seconds each fake run holds its GPU


def verdict(ok, name, why=""):
    print(f"ok - gpu pool: {name}" if ok else f"not ok - gpu pool: {name}: {why}")


def refusals(tool, cases, env):
    """For each (arguments, words) case: whether the tool exits 1 with one line of output holding the words."""
    got = []
    for args, want in cases:
        p = subprocess.run([sys.executable, tool, *args], env=env, capture_output=True, text=True)
        lines = (p.stdout + p.stderr).strip().splitlines()
        got.append(p.returncode == 1 and len(lines) == 1 and want in lines[0])
    return got


def fake_run(i):
    """A run that prints its index, its device and when it held it."""
    code = ("import os, sys, time; t = time.time(); time.sleep(%r); "
            "print(sys.argv[1], os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'), t, time.time())" % HOLD)
    return [sys.executable, "-c", code, str(i)]


def check_ids():
    cases = {"0,1": ["0", "1"], " 2 , 5 ": ["2", "5"], "": [], "-1": []}
    got = {k: gpu_pool.host_gpus({"CUDA_VISIBLE_DEVICES": k}) for k in cases}
    verdict(got == cases, "the GPUs are CUDA_VISIBLE_DEVICES's where it is set (empty or -1: none)", str(got))
    found = gpu_pool.host_gpus({})
    verdict(all(g.isdigit() for g in found), f"else nvidia-smi's indices ({len(found)} here)", str(found))
    avail = ["0", "1", "2", "3"]
    ok = (gpu_pool.choose_gpus(None, avail) == avail and gpu_pool.choose_gpus("all", avail) == avail and
          gpu_pool.choose_gpus("2", avail) == ["0", "1"] and gpu_pool.choose_gpus("3,1", avail) == ["3", "1"])
    verdict(ok, "--gpus all, a count, or ids")
    refused = []
    for bad in ("0", "5", "4,4", "1,7"):
        try:
            gpu_pool.choose_gpus(bad, avail)
        except ValueError as e:
            refused.append(str(e))
    verdict(len(refused) == 4 and all("--gpus" in r for r in refused),
            "a count of 0 or above the GPUs, a repeated or unknown id: refused with the reason", str(refused))


def check_spread():
    gpus = ["7", "9"]
    t0 = time.monotonic()
    runs = gpu_pool.run_spread([fake_run(i) for i in range(5)], gpus)
    wall = time.monotonic() - t0
    rows = [r.output.split() for r in runs]
    verdict([r[0] for r in rows] == [str(i) for i in range(5)] and all(r.returncode == 0 for r in runs),
            "a result per command, in the commands' order", str(rows))
    verdict(all(r[1] == run.gpu and r[1] in gpus for r, run in zip(rows, runs)) and {r[1] for r in rows} == set(gpus),
            "each run sees only its own GPU, and every GPU is used", str(rows))
    held = {g: sorted((float(r[2]), float(r[3])) for r in rows if r[1] == g) for g in gpus}
    overlap = [g for g, spans in held.items() if any(b[0] < a[1] for a, b in zip(spans, spans[1:]))]
    verdict(not overlap, "never two runs on one GPU at a time", str(held))
    # 5 runs on 2 GPUs: 3 rounds of HOLD; one after another would be 5
    verdict(wall < 4 * HOLD, f"5 runs of {HOLD} s on 2 GPUs in {wall:.2f} s (3 rounds; 5 one after another)",
            f"{wall:.2f} s")
    t0 = time.monotonic()
    runs = gpu_pool.run_spread([fake_run(i) for i in range(2)], [])
    wall = time.monotonic() - t0
    env = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
    verdict(wall >= 2 * HOLD and all(r.output.split()[1] == env and r.gpu is None for r in runs),
            "without GPUs, one after another with the environment as it is", f"{wall:.2f} s {runs[0].output}")
    runs = gpu_pool.run_spread([[sys.executable, "-c", "import sys; print('bad'); sys.exit(3)"], fake_run(1)], ["0"])
    verdict([r.returncode for r in runs] == [3, 0] and runs[0].output.strip() == "bad",
            "a failed run's status and output are its own; the others still run", str([r.returncode for r in runs]))


FAKE_APP = r'''#!/usr/bin/env python3
# a stand-in for ./app/mnist under time_to_acc.py: the warm-up step returns at once; a seed's run writes the
# config and target events to its --log after holding its GPU for HOLD seconds
import json, os, sys, time
a = sys.argv[1:]
if "--log" not in a:
    sys.exit(0)
time.sleep(%r)
seed = int(a[a.index("--seed") + 1])
with open(a[a.index("--log") + 1], "w") as f:
    f.write(json.dumps({"event": "config", "shape": "784-8-10", "batch": 8, "recipe": "sgd", "device": "fake",
                        "target": "cuda", "step": "layered", "eval_every": 10,
                        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}) + "\n")
    f.write(json.dumps({"event": "target", "reached": True, "set": "test", "epoch": 1, "step": 10 * seed,
                        "steps": 10 * seed, "acc": 0.99, "train_s": 0.1, "wall_s": 0.2}) + "\n")
    f.write(json.dumps({"event": "epoch", "epoch": 1, "test_acc": 0.99, "train_s": 0.3 + 0.1 * seed}) + "\n")
''' % HOLD


def check_time_to_acc(tmp):
    app = os.path.join(tmp, "fake_mnist")
    with open(app, "w") as f:
        f.write(FAKE_APP)
    os.chmod(app, 0o755)
    tool = os.path.join(REPO, "tools", "time_to_acc.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    out = os.path.join(tmp, "tta.json")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, tool, app, "--target", "98", "--seeds", "4", "--json", out], env=env,
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    r = json.load(open(out)) if p.returncode == 0 else {"rows": [], "summary": {}}
    rows, fixed = r["rows"], r["summary"].get("fixed", {})
    verdict(p.returncode == 0 and [r["seed"] for r in rows] == [1, 2, 3, 4] and
            {r["gpu"] for r in rows} == {"0", "1"} and wall < 3.5 * HOLD,
            f"time_to_acc.py: 4 seeds on 2 GPUs in {wall:.2f} s (two rounds of {HOLD} s), each row its GPU",
            p.stdout[-300:] + p.stderr[-300:])
    verdict(abs(fixed.get("mean_train_s", 0) - 0.55) < 1e-9 and abs(fixed.get("worst_train_s", 0) - 0.7) < 1e-9
            and "training time mean 0.5500 s, worst 0.7000 s" in p.stdout.splitlines()[-1],
            "time_to_acc.py: the fixed-length runs' training time, mean and worst (0.4-0.7 s: 0.55, 0.7)",
            p.stdout[-300:] + str(fixed))
    p = subprocess.run([sys.executable, tool, app, "--target", "98", "--gpus", "3"], env=env, capture_output=True,
                       text=True)
    err = (p.stdout + p.stderr).strip().splitlines()
    verdict(p.returncode == 1 and len(err) == 1 and "--gpus 3" in err[0],
            "time_to_acc.py --gpus 3 on 2 GPUs: one error line, exit 1", str(err))


def check_sweep(tmp, host, valid):
    tool = os.path.join(REPO, "tools", "sweep.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    data = os.environ.get("SNN_DATA", os.path.join(REPO, "data", "mnist"))
    out = os.path.join(tmp, "sweep.json")
    p = subprocess.run([sys.executable, tool, "host,validation", "--app", f"host={host}", "--app",
                        f"validation={valid}", "--seeds", "3", "--out", os.path.join(tmp, "logs"), "--json", out,
                        "--", "--data", data, "--max-steps", "30", "--epochs", "1"], env=env, capture_output=True,
                       text=True)
    r = json.load(open(out)) if p.returncode == 0 else {"runs": [], "rows": []}
    runs, rows = r["runs"], {x["board"]: x for x in r["rows"]}
    host_acc = [x["test_acc"] for x in runs if x["board"] == "host"]
    ok = (p.returncode == 0 and len(runs) == 6 and {x["gpu"] for x in runs} == {"0", "1"} and
          sorted((x["board"], x["seed"]) for x in runs) == [(b, s) for b in ("host", "validation") for s in (1, 2, 3)]
          and rows["host"]["valid_acc"] is None and rows["validation"]["valid_acc"] is not None and
          abs(rows["host"]["test_acc"][0] - sum(host_acc) / 3) < 1e-9 and len(set(host_acc)) > 1 and
          "| host | 3 | 1 |" in p.stdout)
    verdict(ok, "sweep.py: 2 boards x 3 seeds on 2 GPUs, the mean and spread of each board's validation and test "
            "accuracy", p.stdout[-400:] + p.stderr[-300:])
    bad = os.path.join(tmp, "bad_mnist")
    with open(bad, "w") as f:
        f.write("#!/bin/sh\necho 'mnist: error: planted'\nexit 2\n")
    os.chmod(bad, 0o755)
    cases = [(["no_such_board"], "no board no_such_board"), (["host", "--app", f"other={host}"], "--app other="),
             (["host", "--app", f"host={bad}", "--seeds", "1"], "host seed 1: exited with status 2: mnist: error: planted")]
    got = refusals(tool, cases, env)
    verdict(all(got), "sweep.py: an unknown board, a stray --app and a failing run: one error line each, exit 1",
            str(got))


def check_grid_configs(tmp):
    """A variant's config from a board that sets the symbols already: the board's line replaced, a bool unset,
    a choice switched (its other member's line dropped), and Kconfig takes each."""
    types = recipe_grid.symbol_types()
    base = open(os.path.join(REPO, "configs", "h100_speedrun99_defconfig")).read()
    cases = {"lr": ({"TRAIN_LR": "5e-3", "TRAIN_AUGMENT_SHIFT": "2"},
                    ['CONFIG_TRAIN_LR="5e-3"', "CONFIG_TRAIN_AUGMENT_SHIFT=2"],
                    ['CONFIG_TRAIN_LR="3e-3"', "CONFIG_TRAIN_AUGMENT_SHIFT=1"]),
             "sgd": ({"TRAIN_OPTIMIZER_SGD": "y"}, ["CONFIG_TRAIN_OPTIMIZER_SGD=y"],
                     ["CONFIG_TRAIN_OPTIMIZER_ADAMW=y"]),
             "unset": ({"TRAIN_AUGMENT_AFFINE": "n"}, ["# CONFIG_TRAIN_AUGMENT_AFFINE is not set"], [])}
    got = {}
    for name, (settings, want, gone) in cases.items():
        text = recipe_grid.defconfig(base, settings, types)
        lines = text.splitlines()
        path, config = os.path.join(tmp, f"{name}.defconfig"), os.path.join(tmp, f"{name}.config")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([sys.executable, os.path.join("tools", "make", "kconfig.py"), "defconfig", path],
                           cwd=REPO, env=dict(os.environ, KCONFIG_CONFIG=config), capture_output=True, text=True)
        full = open(config).read() if p.returncode == 0 else ""
        got[name] = (all(lines.count(w) == 1 for w in want) and not any(g in lines for g in gone) and
                     all(w in full.splitlines() for w in want if not w.startswith("#")) and p.returncode == 0)
    variants = recipe_grid.variants("b", [("A", ["1", "2"]), ("B", ["x"]), ("C", ["3", "4"])])
    got["names"] = [n for n, _ in variants] == ["b+A=1+C=3", "b+A=1+C=4", "b+A=2+C=3", "b+A=2+C=4"]
    verdict(all(got.values()), "sweep.py --set's configs: the board's own line replaced, a bool unset, a choice "
            "switched to SGD, each taken by Kconfig; variants named by the symbols that vary", str(got))


def check_sweep_grid(tmp):
    """--set: a grid of variants of a board, each built from its own config; and what --set refuses."""
    tool = os.path.join(REPO, "tools", "sweep.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    data = os.environ.get("SNN_DATA", os.path.join(REPO, "data", "mnist"))
    out = os.path.join(tmp, "grid.json")
    p = subprocess.run([sys.executable, tool, "host", "--set", "NN_HIDDEN_WIDTH=16,24", "--set", "CONFIG_TRAIN_LR=0.05",
                        "--seeds", "2", "--out", os.path.join(tmp, "grid"), "--json", out, "--", "--data", data,
                        "--max-steps", "20", "--epochs", "1"], env=env, capture_output=True, text=True)
    r = json.load(open(out)) if p.returncode == 0 else {"runs": [], "rows": []}
    shapes = {}
    for x in r["runs"]:
        log = os.path.join(tmp, "grid", recipe_grid.folder(x["board"]), f"seed-{x['seed']}.jsonl")
        config = next((e for e in map(json.loads, open(log)) if e.get("event") == "config"), {}) \
            if os.path.exists(log) else {}
        shapes[x["board"]] = (config.get("shape"), str(config.get("recipe", "")))
    named = [x["board"] for x in r["rows"]]
    ok = (p.returncode == 0 and named == ["host+NN_HIDDEN_WIDTH=16", "host+NN_HIDDEN_WIDTH=24"]
          and "every variant sets TRAIN_LR=0.05" in p.stdout and len(r["runs"]) == 4 and
          shapes.get("host+NN_HIDDEN_WIDTH=16", ("",))[0] == "784-16-10" and
          shapes.get("host+NN_HIDDEN_WIDTH=24", ("",))[0] == "784-24-10" and
          all("lr 0.05" in recipe for _, recipe in shapes.values()))
    verdict(ok, "sweep.py --set: a grid of 2 variants x 2 seeds, each built from the board's config with its "
            "values (the runs' shapes and learning rate read back)", p.stdout[-400:] + p.stderr[-300:] + str(shapes))
    check_grid_configs(tmp)
    cases = [(["host", "--set", "NO_SUCH_SYMBOL=1"], "Kconfig has no symbol NO_SUCH_SYMBOL"),
             (["host", "--set", "TRAIN_LR=0.1,0.1"], "a value given twice"),
             (["host", "--set", "TRAIN_OPTIMIZER_SGD=n"], "a choice's member: set the member wanted to y"),
             (["host", "--set", "TRAIN_AUGMENT_AFFINE=maybe"], "maybe is not a value of bool symbol"),
             (["host", "--set", "TRAIN_BATCH_SIZE=1.5"], "1.5 is not a value of int symbol"),
             (["host", "--set", "TRAIN_LR=0.1", "--set", "CONFIG_TRAIN_LR=0.2"], "--set TRAIN_LR given twice"),
             (["host", "--set", "TRAIN_LR"], "wants SYMBOL=V1[,V2...]"),
             (["host", "--set", "TRAIN_LR=0.1", "--app", f"host={sys.executable}"], "--app takes a built board"),
             (["no_such_board", "--set", "TRAIN_LR=0.1"], "no board no_such_board")]
    got = refusals(tool, cases, env)
    verdict(all(got), "sweep.py --set: an unknown symbol, a value its type cannot hold, a symbol twice, no value, "
            "--app beside it, an unknown board: one error line each, exit 1", str(got))


EPOCHS_APP = r'''#!/usr/bin/env python3
# a stand-in for ./app/mnist under sweep.py --budget: --epochs E (default 3) epochs, the first 500 ms, the
# others 100 ms (the board's, 40 ms for "fast"), each an epoch event in its --log
import json, sys
a = sys.argv[1:]
n = int(a[a.index("--epochs") + 1]) if "--epochs" in a else 3
ms = 40.0 if "fast" in sys.argv[0] else 100.0
with open(a[a.index("--log") + 1], "w") as f:
    for i in range(1, n + 1):
        f.write(json.dumps({"event": "epoch", "epoch": i, "ms": 500.0 if i == 1 else ms, "test_acc": 0.9,
                            "train_s": 0.1 * i}) + "\n")
'''


def check_sweep_budget(tmp):
    """--budget: each board's epochs fitted to the seconds given from its timing run's second epoch."""
    apps = {}
    for name in ("slow", "fast"):
        apps[name] = os.path.join(tmp, f"{name}_mnist")
        with open(apps[name], "w") as f:
            f.write(EPOCHS_APP)
        os.chmod(apps[name], 0o755)
    tool = os.path.join(REPO, "tools", "sweep.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    out = os.path.join(tmp, "budget.json")
    p = subprocess.run([sys.executable, tool, "slow,fast", "--app", f"slow={apps['slow']}", "--app",
                        f"fast={apps['fast']}", "--budget", "1.05", "--seeds", "2", "--out",
                        os.path.join(tmp, "budget"), "--json", out], env=env, capture_output=True, text=True)
    rows = {r["board"]: r for r in json.load(open(out))["rows"]} if p.returncode == 0 else {}
    timed = all(os.path.exists(os.path.join(tmp, "budget", b, "timing.jsonl")) for b in ("slow", "fast"))
    ok = (p.returncode == 0 and rows.get("slow", {}).get("epochs") == 10 and rows.get("fast", {}).get("epochs") == 26
          and "slow: 100.00 ms an epoch -> 10 epochs for 1.05 s of training" in p.stdout and timed)
    verdict(ok, "sweep.py --budget 1.05: 100 and 40 ms epochs (the timing runs' second) give 10 and 26 epochs",
            p.stdout[-400:] + p.stderr[-300:])
    cases = [(["slow", "--app", f"slow={apps['slow']}", "--budget", "1", "--", "--epochs", "3"],
              "--epochs does not go with it"),
             (["slow", "--app", f"slow={apps['slow']}", "--budget", "0"], "--budget wants seconds above 0")]
    got = refusals(tool, cases, env)
    verdict(all(got), "sweep.py --budget beside --epochs, or of 0 s: one error line each, exit 1", str(got))


def saved_metadata(path):
    """A safetensors file's metadata."""
    with open(path, "rb") as f:
        return json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]


def check_committee(tmp, host, validation):
    tool = os.path.join(REPO, "tools", "committee.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    data = os.environ.get("SNN_DATA", os.path.join(REPO, "data", "mnist"))
    out, js = os.path.join(tmp, "committee"), os.path.join(tmp, "committee.json")
    p = subprocess.run([sys.executable, tool, "host", "--app", host, "--members", "3", "--sizes", "2", "--out", out,
                        "--digit-widths", "0,14", "--json", js, "--", "--data", data, "--max-steps", "30", "--epochs",
                        "1"], env=env, capture_output=True, text=True)
    r = json.load(open(js)) if p.returncode == 0 else {"members": [], "committee": {}, "committees": []}
    files = [m["file"] for m in r["members"]]

    def evaluated(k):
        return subprocess.run([host, "--data", data, *[a for f in files[:k] for a in ("--load", f)], "--eval"],
                              capture_output=True, text=True).stdout

    acc = r["committee"].get("test_acc", -1)
    saved = [saved_metadata(f).get("digit_width") for f in files]
    ok = (p.returncode == 0 and [m["seed"] for m in r["members"]] == [1, 2, 3] and
          [m["digit_width"] for m in r["members"]] == [0, 14, 0] and saved == ["0", "14", "0"] and
          "| 2 | 2 | 14 |" in p.stdout and
          {m["gpu"] for m in r["members"]} == {"0", "1"} and f"accuracy {100 * acc:.2f}%" in evaluated(3) and
          "the committee of 3" in evaluated(3) and f"committee: test accuracy {100 * acc:.2f} %" in p.stdout and
          all(os.path.exists(os.path.join(out, f"committee-{k}.test.npy")) for k in (2, 3)) and
          r["committee"].get("probs") == os.path.join(out, "committee-3"))
    verdict(ok, "committee.py --digit-widths 0,14: 3 members from seeds 1-3 on 2 GPUs at widths as read, 14, as "
            "read, then their committee's --eval, its probabilities kept",
            p.stdout[-400:] + p.stderr[-300:])
    two = next((c for c in r["committees"] if c["members"] == 2), {})
    acc2 = two.get("test_acc", -1)
    ok = ([c["members"] for c in r["committees"]] == [2, 3] and r["committees"][-1] == r["committee"] and
          f"accuracy {100 * acc2:.2f}%" in evaluated(2) and "the committee of 2" in evaluated(2) and
          f"committee of the first 2: test accuracy {100 * acc2:.2f} %" in p.stdout)
    verdict(ok, "committee.py --sizes 2: the committee of members 1-2 beside all 3's, as --eval of those two",
            p.stdout[-400:] + str(r.get("committees")))
    js = os.path.join(tmp, "committee-valid.json")
    p = subprocess.run([sys.executable, tool, "host", "--app", validation, "--members", "2", "--out",
                        os.path.join(tmp, "committee-valid"), "--json", js, "--", "--data", data, "--max-steps", "30",
                        "--epochs", "1"], env=env, capture_output=True, text=True)
    r = json.load(open(js)) if p.returncode == 0 else {"members": [], "committee": {}}
    m = re.search(r"^validation set: loss [0-9.]+, accuracy ([0-9.]+)% \(\d+ of 5000\), the committee of 2$",
                  subprocess.run([validation, "--data", data, *[a for x in r["members"] for a in ("--load", x["file"])],
                                  "--eval"], capture_output=True, text=True).stdout, re.M)
    acc = r["committee"].get("valid_acc")
    ok = (p.returncode == 0 and m and acc is not None and f"{100 * acc:.2f}" == m.group(1) and
          f"committee: validation accuracy {100 * acc:.2f} %, test accuracy" in p.stdout and
          all(os.path.exists(os.path.join(tmp, "committee-valid", f"committee-2.{split}.npy"))
              for split in ("test", "validation")))
    verdict(ok, "committee.py on a build that holds a validation split out: the committee's validation accuracy "
            "beside its test accuracy, as --eval's, both sets' probabilities kept", p.stdout[-400:] + p.stderr[-300:])
    cases = [(["host", "--app", host, "--members", "1"], "--members wants 2 to 64, not 1"),
             (["host", "--app", host, "--members", "3", "--sizes", "1,3"], "--sizes wants sizes from 2 to"),
             (["host", "--app", host, "--members", "3", "--sizes", "4"], "--members (3), not 4"),
             (["host", "--app", host, "--sizes", "two"], "--sizes wants sizes separated by commas"),
             (["host", "--app", host, "--digit-widths", "14,29"], "--digit-widths wants widths from 0"),
             (["host", "--app", host, "--digit-widths", "x"], "--digit-widths wants widths separated by commas"),
             (["host", "--app", host, "--digit-widths", "14", "--", "--digit-width", "12"],
              "--digit-width does not go in the run's options"),
             (["host", "--app", host, "--digit-widths", "14", "--", "--digit=12"],
              "--digit-width does not go in the run's options"),
             (["no_such_board"], "no board no_such_board")]
    got = refusals(tool, cases, env)
    verdict(all(got), "committee.py: one member, --sizes or --digit-widths out of range or not numbers, "
            "--digit-width among the run's options, an unknown board: one error line each", str(got))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tests/host/test_gpu_pool.py HOST/mnist VALIDATION/mnist")
    check_ids()
    check_spread()
    with tempfile.TemporaryDirectory() as tmp:
        check_time_to_acc(tmp)
        check_sweep(tmp, sys.argv[1], sys.argv[2])
        check_sweep_grid(tmp)
        check_sweep_budget(tmp)
        check_committee(tmp, sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
