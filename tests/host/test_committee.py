#!/usr/bin/env python3
"""mnist --load A --load B ... --eval | --predict, a committee (app/committee.c), on the host engine: its
figures against numpy's forward pass of the saved files (the mean of the members' softmax, its arg-max and
mean -log of the label's mean probability), each member's line as --eval of it alone, a committee of one
model twice as that model, --predict by the mean probability, and the refusals (one line, exit 1); in a build
that holds a validation split out, the committee's (and one model's) figures on it too, before the test set's.
Members trained at different --digit-width each see the images at their own width (numpy's:
tools/lib/digit_width.py). --eval --probs PREFIX writes the probabilities numpy computes (PREFIX.test.npy,
and PREFIX.validation.npy in the validation build), and tools/ensemble.py mixes such files by weight as
numpy does; the refusals of both.

    tests/host/test_committee.py PATH/TO/mnist [VALIDATION/mnist]   (a host build of 784-256-10; one that holds
                                                                    the last 5000 training images out; the
                                                                    data in data/mnist)
"""
import io
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "lib"))
from digit_width import set_digit_width  # noqa: E402
from torch_parity import load_test_set, load_train_set, normalise  # noqa: E402

DATA = os.path.join(HERE, "..", "..", "data", "mnist")


def verdict(ok, name, why=""):
    print(f"ok - committee: {name}" if ok else f"not ok - committee: {name}: {why}")


def mnist(app, *args):
    p = subprocess.run([app, "--data", DATA, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def weights(path):
    """The saved tensors as float32 arrays, and the metadata."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    meta = header.pop("__metadata__")
    arrays = {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32).reshape(v["shape"])
              for k, v in header.items()}
    return arrays, meta


def probabilities(path, images):
    """The model's softmax over the images (bytes, at the digit width the file names), in float64 from its float32
    forward pass."""
    w, meta = weights(path)
    digits = set_digit_width(images, int(meta.get("digit_width", "0")))
    h = normalise(digits, 0.1307, 0.3081).reshape(len(images), -1).astype(np.float32)
    layers = len(meta["shape"].split("-")) - 1
    for l in range(layers):
        h = h @ w[f"{2 * l}.weight"].T + w[f"{2 * l}.bias"]
        if l + 1 < layers:
            h = np.maximum(h, 0)
    z = h.astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def figures(out, tag="test set"):
    m = re.search(rf"^{tag}: loss ([0-9.]+), accuracy ([0-9.]+)% \((\d+) of", out, re.M)
    return (float(m.group(1)), int(m.group(3))) if m else None


def committee_figures(files, images, labels):
    """numpy's committee of the files on the images: how many it gets right, and its loss."""
    mean = sum(probabilities(f, images) for f in files) / len(files)
    return int((mean.argmax(axis=1) == labels).sum()), float(-np.log(mean[np.arange(len(labels)), labels]).mean())


def held_out_as(path, new, held_out):
    """A copy of the weights file at path whose metadata names another validation split."""
    with open(path, "rb") as f:
        data = f.read()
    old = b'"validation_size":"5000"'
    assert data.count(old) == 1
    with open(new, "wb") as f:  # JSON whitespace keeps the header's length
        f.write(data.replace(old, f'"validation_size":"{held_out}"'.encode().ljust(len(old))))
    return new


ENSEMBLE = os.path.join(HERE, "..", "..", "tools", "ensemble.py")


def ensemble(*args):
    p = subprocess.run([sys.executable, ENSEMBLE, "--data", DATA, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def mixture_line(out, split):
    m = re.search(rf"^mixture, {split}: accuracy [0-9.]+ % \((\d+) of (\d+)\), loss ([0-9.]+)$", out, re.M)
    return (int(m.group(1)), int(m.group(2)), float(m.group(3))) if m else None


def check_probs(app, d, files, images, labels):
    """--eval --probs: one model's and a committee's probabilities as numpy's; tools/ensemble.py's weighted mixture
    of a committee of two and a third model as numpy's mean of the three; the refusals."""
    one, two = os.path.join(d, "p-one"), os.path.join(d, "p-two")
    rc1, out1, err1 = mnist(app, "--load", files[2], "--eval", "--probs", one)
    rc2, out2, err2 = mnist(app, "--load", files[0], "--load", files[1], "--eval", "--probs", two)
    got = [np.load(p + ".test.npy") if os.path.exists(p + ".test.npy") else None for p in (one, two)]
    want = [probabilities(files[2], images), sum(probabilities(f, images) for f in files[:2]) / 2]
    diff = [float(np.abs(g - w).max()) if g is not None and g.shape == w.shape else 1.0 for g, w in zip(got, want)]
    header = open(two + ".test.npy", "rb").read(128) if got[1] is not None else b""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (10000, 10)})
    ok = (rc1 == rc2 == 0 and all(g is not None and g.dtype == np.float32 for g in got) and max(diff) < 2e-6 and
          header == buf.getvalue() and f"probabilities written: {one}.test.npy\n" in out1 and
          f"probabilities written: {two}.test.npy\n" in out2 and not os.path.exists(one + ".validation.npy"))
    verdict(ok, f"--eval --probs: one model's and a committee of 2's test probabilities, float32 [10000][10] after "
            f"numpy's own 128-byte header, as numpy's within {max(diff):.1e}", (diff, out1[-200:] + err1 + err2))
    colon = os.path.join(d, "c:2")
    rc, _, err = mnist(app, "--load", files[2], "--eval", "--probs", colon)
    rc2, out, err2 = ensemble(colon, f"{one}:1")
    line = mixture_line(out, "test")
    ok = rc == rc2 == 0 and line and line[0] == int((got[0].argmax(axis=1) == labels).sum())
    verdict(ok, "ensemble.py takes a prefix ending in ':2' whole where its files exist", out[-300:] + err + err2)
    rc, out, err = ensemble(f"{two}:2", one)
    mean = (2 * got[1].astype(np.float64) + got[0].astype(np.float64)) / 3 if all(g is not None for g in got) else None
    line = mixture_line(out, "test")
    exact = int((mean.argmax(axis=1) == labels).sum()) if mean is not None else -1
    right, _ = committee_figures(files, images, labels)
    loss = float(-np.log(mean[np.arange(len(labels)), labels]).mean()) if mean is not None else -1
    ok = (rc == 0 and line and line[0] == exact and line[1] == 10000 and abs(line[2] - loss) < 5e-5 and
          abs(exact - right) <= 1 and "validation" not in out)
    verdict(ok, f"ensemble.py PREFIX:2 PREFIX: the weighted mean of the files, {exact} right (numpy's committee "
            f"of the 3 models: {right})", out[-300:] + err)
    bad = os.path.join(d, "bad")
    np.save(bad + ".test.npy", np.zeros((10, 10), np.float32))
    np.save(os.path.join(d, "rows.test.npy"), np.full((9999, 10), 0.1, np.float32))
    for name, args, want in (
            ("a missing prefix", [os.path.join(d, "none")], "none.test.npy: no such file"),
            ("a weight of 0", [f"{one}:0"], "a weight is a positive number"),
            ("a weight that is not a number", [f"{one}:x"], "the weight after ':' is not a number"),
            ("rows that are not probabilities", [bad], "its rows are not probabilities"),
            ("9999 rows", [os.path.join(d, "rows")], "the test arrays have [9999] rows, the test labels 10000"),
            ("no prefix before the weight", [":2"], "no prefix before the weight"),
            ("--validation-only without validation arrays", ["--validation-only", one],
             "p-one.validation.npy: no such file")):
        rc, out, err = ensemble(*args)
        lines = err.strip().splitlines()
        verdict(rc == 1 and len(lines) == 1 and want in lines[0] and lines[0].startswith("ensemble: error:"),
                f"ensemble.py refuses in one line: {name}", err.strip() or out[-200:])
    for name, args, want in (
            ("--probs without --eval", ["--load", files[0], "--probs", one], "--probs writes the probabilities"),
            ("--probs into a missing directory", ["--load", files[0], "--eval", "--probs",
                                                  os.path.join(d, "no", "p")], "does not exist"),
            ("--probs and --log on one file", ["--load", files[0], "--eval", "--probs", one, "--log",
                                               one + ".test.npy"], "--log and --probs name the same file")):
        rc, out, err = mnist(app, *args)
        lines = err.strip().splitlines()
        verdict(rc == 1 and len(lines) == 1 and want in lines[0] and lines[0].startswith("mnist: error:"),
                f"refused in one line: {name}", err.strip())


def check_validation(app, d):
    """A validation build's committee: the held-out images scored first, as numpy's mean of the softmax; not
    scored where a member was trained on them."""
    files = [os.path.join(d, f"v{s}.st") for s in (1, 2)]
    for s, f, width in zip((1, 2), files, ([], ["--digit-width", "16"])):
        rc, _, err = mnist(app, "--epochs", "1", "--max-steps", "100", "--seed", str(s), "--save", f, *width)
        if rc:
            verdict(False, "training the validation build's members", err.strip().splitlines()[-1:])
            return
    images, labels = load_train_set(DATA)
    want_right, want_loss = committee_figures(files, images[-5000:], labels[-5000:])
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as log:
        rc, out, err = mnist(app, *[a for f in files for a in ("--load", f)], "--eval", "--log", log.name)
        events = [json.loads(line) for line in open(log.name)]
    got = figures(out, "validation set")
    members = re.findall(r"^member (\d), validation set: loss ([0-9.]+), accuracy ([0-9.]+)%  (\S+)$", out, re.M)
    alone = [committee_figures([f], images[-5000:], labels[-5000:])[0] for f in files]
    event = next((e for e in events if e.get("event") == "validation"), {})
    ok = (rc == 0 and got and got[1] == want_right and abs(got[0] - want_loss) < 5e-5 and len(members) == 2 and
          [round(float(m[2]) * 50) for m in members] == alone and
          -1 < out.find("validation set:") < out.find("test set:") and event.get("members") == 2 and
          event.get("samples") == 5000 and abs(event.get("accuracy", -1) - want_right / 5000) < 1e-6 and
          [round(a, 4) for a in event.get("member_accuracy", [])] == [float(m[2]) / 100 for m in members] and
          [m[3] for m in members] == files)
    verdict(ok, f"a validation build's 2 members (one at digit width 16): the held-out 5000 first, {want_right} "
            f"right, loss {want_loss:.4f}, as numpy's; each member's line and the log's validation event",
            got or out + err)
    prefix = os.path.join(d, "pv")
    rc, out, err = mnist(app, *[a for f in files for a in ("--load", f)], "--eval", "--probs", prefix)
    arrays = {s: np.load(f"{prefix}.{s}.npy") for s in ("validation", "test") if os.path.exists(f"{prefix}.{s}.npy")}
    want_p = sum(probabilities(f, images[-5000:]) for f in files) / 2
    diff = float(np.abs(arrays["validation"] - want_p).max()) if "validation" in arrays else 1.0
    ok = (rc == 0 and arrays.get("test", np.zeros(0)).shape == (10000, 10) and diff < 2e-6 and
          f"probabilities written: {prefix}.test.npy, {prefix}.validation.npy" in out)
    verdict(ok, f"--eval --probs in a validation build: the held-out 5000's probabilities too, as numpy's within "
            f"{diff:.1e}", out[-200:] + err)
    rc, out, err = ensemble(prefix)
    line = mixture_line(out, "validation")
    ok = rc == 0 and line == (want_right, 5000, line[2] if line else -1) and abs(line[2] - want_loss) < 5e-5 and \
        -1 < out.find("mixture, validation") < out.find("mixture, test")
    verdict(ok, f"ensemble.py on a validation build's prefix: the held-out 5000 first, {want_right} right, as the "
            "committee's --eval", out[-300:] + err)
    rc, out, err = ensemble("--validation-only", prefix)
    ok = (rc == 0 and mixture_line(out, "validation") == line and "mixture, test" not in out and
          "test accuracy" not in out)
    verdict(ok, "ensemble.py --validation-only: the split alone, the test set not read", out[-300:] + err)
    with open(f"{prefix}.validation.npy", "r+b") as f:
        f.write(b"not a numpy file")
    rc, out, err = ensemble(prefix)
    lines = err.strip().splitlines()
    ok = rc == 1 and len(lines) == 1 and "pv.validation.npy" in lines[0] and lines[0].startswith("ensemble: error:")
    verdict(ok, "ensemble.py refuses in one line: a malformed validation file", err.strip() or out[-200:])
    other = held_out_as(files[0], os.path.join(d, "v1-none.st"), "0")
    rc, out, err = mnist(app, "--load", other, "--eval", "--probs", prefix)
    ok = (rc == 0 and os.path.exists(f"{prefix}.test.npy") and not os.path.exists(f"{prefix}.validation.npy") and
          f"removed {prefix}.validation.npy: an earlier evaluation's; this one scored no validation split" in out)
    verdict(ok, "--probs where the split is not scored (a member trained without it): the earlier validation file "
            "removed, saying so", out[-300:] + err)
    rc, out, err = mnist(app, "--load", files[1], "--eval")
    one = figures(out, "validation set")
    want = committee_figures(files[1:], images[-5000:], labels[-5000:])
    ok = (rc == 0 and one and one[1] == want[0] and abs(one[0] - want[1]) < 5e-5 and
          re.search(r"^validation set: .*\(\d+ of 5000\)$", out, re.M) and -1 < out.find("validation set:") <
          out.find("test set:") and "member 1" not in out)
    verdict(ok, f"one model of a validation build (at digit width 16): the held-out 5000 first, {want[0]} right, "
            "as numpy's", one or out + err)
    for held_out in ("0", "4000"):
        other = held_out_as(files[1], os.path.join(d, f"v2-{held_out}.st"), held_out)
        rc, out, err = mnist(app, "--load", files[0], "--load", other, "--eval")
        note = (f"validation set: not scored: {other} was trained without this build's split of the last 5000 "
                f"training images held out (its validation_size: {held_out})")
        ok = rc == 0 and note in out.splitlines() and not figures(out, "validation set") and figures(out)
        verdict(ok, f"a member trained with validation_size {held_out}: the split not scored, a note naming it, "
                "the test set as before", out[-300:] + err)
    rc, out, err = mnist(app, "--load", held_out_as(files[0], os.path.join(d, "v1-0.st"), "0"), "--eval")
    ok = rc == 0 and "validation set: not scored:" in out and not figures(out, "validation set") and figures(out)
    verdict(ok, "one model trained with validation_size 0: the split not scored, a note naming it", out[-300:] + err)


def main():
    app = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        files = [os.path.join(d, f"m{s}.st") for s in (1, 2, 3)]
        for s, f, width in zip((1, 2, 3), files, ([], ["--digit-width", "12"], ["--digit-width", "20"])):
            rc, _, err = mnist(app, "--epochs", "1", "--max-steps", "200", "--seed", str(s), "--save", f, *width)
            if rc:
                verdict(False, "training the members", err.strip().splitlines()[-1:])
                return
        images, labels = load_test_set(DATA)
        want_right, want_loss = committee_figures(files, images, labels)
        rc, out, err = mnist(app, *[a for f in files for a in ("--load", f)], "--eval")
        got = figures(out)
        ok = rc == 0 and got and got[1] == want_right and abs(got[0] - want_loss) < 5e-5 and \
            "the committee of 3" in out and "validation set" not in out
        verdict(ok, f"3 members' --eval (trained as the digits are, 12 and 20 pixels wide): {want_right} of 10000 "
                f"right, loss {want_loss:.4f}, as numpy's mean of their softmax", got or out + err)
        with tempfile.TemporaryDirectory() as logs:
            both = os.path.join(logs, "c.jsonl"), os.path.join(logs, "one.jsonl")
            mnist(app, *[a for f in files for a in ("--load", f)], "--eval", "--log", both[0])
            mnist(app, "--load", files[1], "--eval", "--log", both[1])
            events = [[json.loads(line) for line in open(p)] if os.path.exists(p) else [] for p in both]
        member_widths = [e.get("digit_width") for e in events[0] if e.get("event") == "member"]
        config = [e for e in events[0] + events[1] if e.get("event") == "config"]
        ok = member_widths == [0, 12, 20] and len(config) == 2 and "digit_width" not in config[0] and \
            config[1].get("digit_width") == 12
        verdict(ok, "--eval's log: each member's digit width in its event (0, 12, 20); one model's in the config",
                (member_widths, config))
        alone = [figures(mnist(app, "--load", f, "--eval")[1]) for f in files]
        lines = re.findall(r"^member (\d): loss ([0-9.]+), accuracy ([0-9.]+)%  (\S+)$", out, re.M)
        ok = len(lines) == 3 and all(float(l[1]) == a[0] and round(float(l[2]) * 100) == a[1] and l[3] == f
                                     for l, a, f in zip(lines, alone, files))
        verdict(ok, "each member's line is --eval of it alone, with its file", (lines, alone))
        rc, twice, _ = mnist(app, "--load", files[0], "--load", files[0], "--eval")
        got, one = figures(twice), alone[0]
        ok = rc == 0 and got and got[1] == one[1] and abs(got[0] - one[0]) < 2e-4
        verdict(ok, "a committee of one model twice scores as the model", (got, one))
        digits = sorted(p for p in os.listdir(os.path.join(HERE, "..", "fuzz", "corpus_image"))
                        if not p.startswith("bad-"))[:3]
        digits = [os.path.join(HERE, "..", "fuzz", "corpus_image", p) for p in digits]
        for f in files[:2]:
            rc1, single, _ = mnist(app, "--load", f, "--predict", *digits)
            rc2, double, _ = mnist(app, "--load", f, "--load", f, "--predict", *digits)
            alone = "  model " + f + "\n" + "".join(l + "\n" for l in single.splitlines() if "digits scaled" in l)
            ok = rc1 == rc2 == 0 and single == double.replace("  committee of 2 models, the mean of their "
                                                              "probabilities\n", alone)
            verdict(ok, f"--predict by a committee of one model twice prints the model's own ({len(digits)} images, "
                    f"{os.path.basename(f)})", (single, double))
        for name, args, want in (
                ("two --load files for training", ["--load", files[0], "--load", files[1], "--epochs", "1"],
                 "--load given 2 times: a run trains from one model's weights"),
                ("65 members", [a for _ in range(65) for a in ("--load", files[0])] + ["--eval"],
                 "--load given more than 64 times"),
                ("a member that cannot be read", ["--load", files[0], "--load", os.path.join(d, "none.st"),
                                               "--eval"], "none.st")):
            rc, out, err = mnist(app, *args)
            lines = err.strip().splitlines()
            ok = rc == 1 and len(lines) == 1 and want in lines[0] and lines[0].startswith("mnist: error:")
            verdict(ok, f"refused in one line: {name}", err.strip())
        check_probs(app, d, files, images, labels)
        if len(sys.argv) > 2:
            check_validation(sys.argv[2], d)


if __name__ == "__main__":
    main()
