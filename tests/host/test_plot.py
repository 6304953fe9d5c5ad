#!/usr/bin/env python3
"""tools/plot.py and make plot on the logs of two short training runs of the
host build, a log written by train_log's writer (as torch_bench.py --log
writes it) with an evaluation event, a run that ended in an error, and the
inputs it must refuse.

    tests/host/test_plot.py HOST_MNIST
"""
import os
import struct
import subprocess
import sys
import tempfile
import time

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("skip - plot: skipped: no matplotlib for this python3")
    sys.exit(0)

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, os.path.join(REPO, "tools", "lib"))
import train_log  # noqa: E402

PLOT = os.path.join(REPO, "tools", "plot.py")
DATA = os.environ.get("SNN_DATA", "data/mnist")
MAX_SECONDS = 5  # per plot call
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def verdict(ok, name, why=""):
    print(f"ok - plot: {name}" if ok else f"not ok - plot: {name}: {why}")


def png_size(path):
    """(width, height) from a PNG's IHDR chunk, or None if the file is no PNG."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def bad_pngs(paths, min_width=800, min_height=400):
    """What is wrong with each path that is not a plausible plot, as 'name: why' strings."""
    bad = []
    for path in paths:
        size = png_size(path)
        if size is None:
            bad.append(f"{os.path.basename(path)}: missing or not a PNG")
        elif size[0] < min_width or size[1] < min_height or size[0] > 4000 or size[1] > 4000:
            bad.append(f"{os.path.basename(path)}: {size[0]}x{size[1]} pixels")
        elif os.path.getsize(path) < 20000:
            bad.append(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes")
    return bad


def plot(*args):
    """tools/plot.py's status, stdout, stderr and seconds."""
    start = time.perf_counter()
    p = subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - start


def train(app, log, epochs):
    p = subprocess.run([app, "--data", DATA, "--epochs", str(epochs), "--max-steps", "50", "--log", log],
                       capture_output=True, text=True)
    return p.returncode == 0 and os.path.exists(log), p.stderr.strip()


def test_training_logs(app, tmp):
    logs = [os.path.join(tmp, "two.jsonl"), os.path.join(tmp, "three.jsonl")]
    for log, epochs in zip(logs, (2, 3)):
        ok, why = train(app, log, epochs)
        if not ok:
            verdict(False, "two short training runs", why)
            return None
    out = os.path.join(tmp, "out")
    rc, stdout, stderr, secs = plot("--out", out, *logs)
    want = [os.path.join(out, n) for n in ("curves-epoch.png", "curves-time.png")]
    # a training log may end with an evaluation event, and then its confusion matrix is plotted too
    confusions = [os.path.join(out, f"confusion-{n}.png") for n in ("two", "three")]
    printed = stdout.split()
    bad = bad_pngs(printed)
    verdict(rc == 0 and printed[:2] == want and set(printed[2:]) <= set(confusions) and not bad,
            "two runs' logs give curves-epoch.png and curves-time.png, valid PNGs, their paths printed",
            f"status {rc}, printed {printed}, {'; '.join(bad)} {stderr.strip()}")
    verdict(secs < MAX_SECONDS, f"plotting two runs takes under {MAX_SECONDS} s", f"{secs:.1f} s")
    return logs


def synthetic_events(classes=10):
    """A run as torch_bench.py --log writes it, ending with an evaluation event."""
    confusion = [[90 if i == j else (1 if j == (i + 1) % classes else 0) for j in range(classes)]
                 for i in range(classes)]
    events = [train_log.event("config", target="pytorch-graph", shape="784-128-10", precision="bf16")]
    for epoch in (1, 2, 3):
        events.append(train_log.epoch_event(epoch, 0.3 / epoch, 0.9 + 0.02 * epoch, 0.25 / epoch,
                                            0.91 + 0.02 * epoch, 20.0, 0.25 * epoch, 0.5 * epoch, 59968))
    events.append(train_log.event("evaluation", set="test", loss=0.08, accuracy=0.989, confusion=confusion,
                                  per_class_accuracy=[90 / 91] * classes))
    return events


def test_long_run(tmp):
    """A run of hundreds of epochs: its accuracy axis starts below everything after its first twentieth (else
    its first epochs flatten the end, where runs differ by tenths of a point), and a short run keeps the whole
    axis."""
    import plot as plot_module
    events = [train_log.event("config", target="cuda", shape="784-128-10", precision="bf16")]
    for epoch in range(1, 201):
        acc = 0.99 - 0.5 / epoch  # 49 % after the first epoch, 94 % after the tenth (a twentieth of the run)
        events.append(train_log.epoch_event(epoch, 0.3 / epoch, acc, 0.25 / epoch, acc, 20.0, 0.02 * epoch,
                                            0.03 * epoch, 59968))
    path = os.path.join(tmp, "long.jsonl")
    with open(path, "w") as f:
        train_log.write(f, events)
    long_run, short_run = train_log.read(path), train_log.read(os.path.join(tmp, "torch.jsonl"))
    low = 100 * (0.99 - 0.5 / 11)  # the least accuracy from epoch 11 (index 10 = 200 // 20) on
    floor = plot_module.accuracy_floor([long_run])
    rc, stdout, stderr, _ = plot("--out", os.path.join(tmp, "out-long"), path)
    bad = bad_pngs(stdout.split()[:2])
    verdict(floor is not None and abs(floor - (low - 0.1 * (100 - low))) < 1e-9 and
            plot_module.accuracy_floor([short_run]) is None and rc == 0 and not bad,
            "a 200-epoch run's accuracy axis starts below its epochs after the first twentieth, a 3-epoch "
            "run's does not move; the long run plots", f"{floor}, {low}, status {rc}, {bad} {stderr.strip()}")


def test_writer_and_confusion(tmp):
    path = os.path.join(tmp, "torch.jsonl")
    with open(path, "w") as f:
        train_log.write(f, synthetic_events())
    run = train_log.read(path)
    last = run.epochs[-1]
    verdict(run.config["target"] == "pytorch-graph" and len(run.epochs) == 3 and last["test_acc"] == 0.97
            and last["train_s"] == 0.75 and last["wall_s"] == 1.5 and last["samples_per_s"] == 59968 / 0.02
            and run.evaluation["confusion"][0][1] == 1 and run.stopped is None,
            "the log torch_bench.py writes reads back: config, epochs (test_*, train_s, wall_s), evaluation",
            vars(run))
    out = os.path.join(tmp, "out-eval")
    rc, stdout, stderr, _ = plot("--out", out, "--label", "PyTorch graph", path)
    confusion = os.path.join(out, "confusion-torch.png")
    bad = bad_pngs([confusion], min_width=500)
    verdict(rc == 0 and confusion in stdout.split() and not bad,
            "a log with an evaluation event gives its confusion matrix, a valid PNG",
            f"status {rc}, printed {stdout.split()}, {'; '.join(bad)} {stderr.strip()}")


def test_validation_curve(tmp, logs):
    """An epoch event with valid_loss and valid_acc (a build with CONFIG_TRAIN_VALIDATION_SIZE) adds the
    validation curve; the host runs' logs have none."""
    import plot as plot_module  # matplotlib is here: the module imports
    events = synthetic_events()
    for e in events:
        if e.get("event") == "epoch":
            e.update(valid_loss=e["test_loss"] * 1.1, valid_acc=e["test_acc"] - 0.01)
    path = os.path.join(tmp, "valid.jsonl")
    with open(path, "w") as f:
        train_log.write(f, events)
    sets = plot_module.sets_of(train_log.read(path))
    plain = [plot_module.sets_of(train_log.read(log)) for log in logs or []]
    out = os.path.join(tmp, "out-valid")
    rc, stdout, stderr, _ = plot("--out", out, path, *(logs or []))
    bad = bad_pngs(stdout.split()[:2])
    verdict(sets == ["train", "valid", "test"] and all(p == ["train", "test"] for p in plain) and rc == 0
            and not bad, "a log with validation figures gets the validation curve (dotted), beside logs without",
            f"sets {sets}, the host logs' {plain}, status {rc}, {'; '.join(bad)} {stderr.strip()}")


def test_stopped_run(tmp, log):
    path = os.path.join(tmp, "stopped.jsonl")
    with open(log) as f:
        lines = [line for line in f if '"event":"epoch"' in line.replace(" ", "")][:1]
    with open(path, "w") as f:
        f.writelines(lines)
        train_log.write(f, [train_log.event("error", message="training diverged: the loss is NaN")])
    rc, stdout, stderr, _ = plot("--out", os.path.join(tmp, "out-stopped"), path)
    verdict(rc == 0 and len(stdout.split()) == 2 and "ended in an error: training diverged" in stderr,
            "a run that ended in an error is plotted as far as it got, with a note",
            f"status {rc}, {stdout!r} {stderr!r}")


def expect_refusal(tmp, name, path, fragment):
    rc, stdout, stderr, _ = plot("--out", os.path.join(tmp, "out-bad"), path)
    lines = (stdout + stderr).strip().splitlines()
    ok = rc == 1 and len(lines) == 1 and fragment in lines[0] and "Traceback" not in stderr
    verdict(ok, f"{name}: exit 1, one line naming the problem", f"status {rc}, {lines}")


def test_refusals(tmp):
    empty = os.path.join(tmp, "empty.jsonl")
    open(empty, "w").close()
    garbled = os.path.join(tmp, "garbled.jsonl")
    with open(garbled, "w") as f:
        f.write('{"event":"config","target":"host"}\n{"event":"epoch", truncated\n')
    expect_refusal(tmp, "a missing file", os.path.join(tmp, "nothing.jsonl"), "nothing.jsonl: no such file")
    expect_refusal(tmp, "a line that is not JSON", garbled, "garbled.jsonl line 2: not JSON")
    expect_refusal(tmp, "an empty log", empty, "empty.jsonl: empty")


def test_make_plot(tmp, logs):
    p = subprocess.run(["make", "--no-print-directory", "plot"], cwd=REPO, capture_output=True, text=True)
    verdict(p.returncode != 0 and "usage: make plot LOG=" in p.stderr,
            "make plot without LOG fails with its usage line", f"status {p.returncode}, {p.stderr.strip()}")
    if not logs:
        return
    out = os.path.join(tmp, "out-make")
    p = subprocess.run(["make", "--no-print-directory", "plot", f"LOG={' '.join(logs)}", f"PLOT_OUT={out}"],
                       cwd=REPO, capture_output=True, text=True)
    written = [os.path.join(out, n) for n in ("curves-epoch.png", "curves-time.png")]
    verdict(p.returncode == 0 and not bad_pngs(written), "make plot LOG=... PLOT_OUT=DIR writes the curves there",
            f"status {p.returncode}, {p.stdout.strip()} {p.stderr.strip()}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_plot.py HOST_MNIST")
    os.chdir(REPO)
    with tempfile.TemporaryDirectory(prefix="snn-plot.") as tmp:
        logs = test_training_logs(os.path.abspath(sys.argv[1]), tmp)
        test_writer_and_confusion(tmp)
        test_long_run(tmp)
        test_validation_curve(tmp, logs)
        if logs:
            test_stopped_run(tmp, logs[0])
        test_refusals(tmp)
        test_make_plot(tmp, logs)


if __name__ == "__main__":
    main()
