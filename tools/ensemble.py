#!/usr/bin/env python3
"""Committees of models of any shapes: the weighted mean of the class probabilities that mnist --eval --probs
wrote, scored on the test set and, where every input holds it, on the validation split.

    tools/ensemble.py PREFIX[:WEIGHT] ... [--validation-only] [--data DIR] [--json OUT]

One build loads models of one shape, so its committees (mnist --load A --load B ... --eval) cannot mix a
784-1024x2 with a 784-2500-...-500. Each PREFIX names the arrays mnist --load ... --eval --probs PREFIX
wrote: PREFIX.test.npy and, where the build held the split out, PREFIX.validation.npy (float32, a row an
image; tools/committee.py writes its committee's as OUT/committee-K). WEIGHT (default 1) is the input's share
of the mean: give a committee's prefix its member count so that every member weighs alike (a prefix whose
own name ends in ':N' is taken whole where its files exist). Prints each input's accuracy and the mixture's,
the validation split's first, with the mixture's loss (the mean over the images of -log of the label's
probability) and how many images it gets right. --validation-only scores the split alone, so that mixtures
can be chosen on it before the test set is read once. The labels are --data's (default data/mnist): the test
set's, and the last N training images' for validation arrays of N rows. Exits 1 with one line on a missing
or malformed file, mismatched rows or a bad weight.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # torch_parity's dataset reader
from torch_parity import DataError, load_test_set, load_train_set  # noqa: E402

PROG = "ensemble"
CLASSES = 10
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def parse_input(text):
    """'PREFIX' or 'PREFIX:WEIGHT' -> (prefix, weight); text is a prefix whole where its test file exists."""
    prefix, sep, weight = text.rpartition(":")
    if not sep or os.path.exists(f"{text}.test.npy"):
        return text, 1.0
    if not prefix:
        fail(f"{text}: no prefix before the weight")
    try:
        w = float(weight)
    except ValueError:
        fail(f"{text}: the weight after ':' is not a number")
    if not (w > 0 and np.isfinite(w)):
        fail(f"{text}: a weight is a positive number")
    return prefix, w


def read_probs(path):
    """The probabilities in path, float64 [rows][CLASSES], checked: float32, two dimensions, rows summing to 1."""
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if a.dtype != np.float32 or a.ndim != 2 or a.shape[1] != CLASSES or a.shape[0] < 1:
        fail(f"{path}: {a.dtype} {a.shape}, not the float32 [images][{CLASSES}] that mnist --probs writes")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.abs(a.sum(axis=1) - 1).max() > 1e-4:
        fail(f"{path}: its rows are not probabilities (each at least 0, summing to 1)")
    return a.astype(np.float64)


def score(probs, labels):
    """(images right, mean -log of the label's probability) of probabilities against labels."""
    right = int((probs.argmax(axis=1) == labels).sum())
    return right, float(-np.log(np.maximum(probs[np.arange(len(labels)), labels], 1e-300)).mean())


def mix(inputs, split, labels_of):
    """Each input's figures and the weighted mixture's on one split, against labels_of(the first array's rows):
    a dict for the report."""
    arrays = [read_probs(f"{p}.{split}.npy") for p, _ in inputs]
    labels = labels_of(arrays[0].shape[0])
    rows = {a.shape[0] for a in arrays}
    if rows != {len(labels)}:
        fail(f"the {split} arrays have {sorted(rows)} rows, the {split} labels {len(labels)}")
    total = sum(w for _, w in inputs)
    mixture = sum(w * a for a, (_, w) in zip(arrays, inputs)) / total
    right, loss = score(mixture, labels)
    return {"images": len(labels), "inputs": [score(a, labels)[0] / len(labels) for a in arrays],
            "right": right, "accuracy": right / len(labels), "loss": loss}


def main():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("inputs", nargs="+", metavar="PREFIX[:WEIGHT]", help="mnist --probs prefixes, each with a weight")
    p.add_argument("--validation-only", action="store_true", help="score the validation split alone")
    p.add_argument("--data", default=os.path.join(REPO, "data", "mnist"), help="the dataset (default data/mnist)")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    inputs = [parse_input(t) for t in args.inputs]
    for prefix, _ in inputs:
        if not os.path.exists(f"{prefix}.test.npy"):
            fail(f"{prefix}.test.npy: no such file (mnist --load ... --eval --probs {prefix} writes it)")
    with_valid = [os.path.exists(f"{prefix}.validation.npy") for prefix, _ in inputs]
    missing = next((prefix for (prefix, _), has in zip(inputs, with_valid) if not has), None)
    if args.validation_only and missing:
        fail(f"--validation-only: {missing}.validation.npy: no such file (a build that holds the split out writes it)")
    report = {"inputs": [{"prefix": p, "weight": w} for p, w in inputs]}
    try:
        if not missing:  # the split: the last rows of the training set
            report["validation"] = mix(inputs, "validation", lambda rows: load_train_set(args.data)[1][-rows:])
        elif any(with_valid):
            print(f"validation split: not scored: {missing}.validation.npy is missing")
        if not args.validation_only:
            report["test"] = mix(inputs, "test", lambda rows: load_test_set(args.data)[1])
    except DataError as e:
        fail(str(e))
    print("| input | weight | " + " | ".join(f"{s} accuracy" for s in ("validation", "test") if s in report) + " |")
    print("|---|---|" + "---|" * sum(s in report for s in ("validation", "test")))
    for i, (prefix, w) in enumerate(inputs):
        cells = [f"{100 * report[s]['inputs'][i]:.2f} %" for s in ("validation", "test") if s in report]
        print(f"| {prefix} | {w:g} | " + " | ".join(cells) + " |")
    for s in ("validation", "test"):
        if s in report:
            r = report[s]
            print(f"mixture, {s}: accuracy {100 * r['accuracy']:.2f} % ({r['right']} of {r['images']}), "
                  f"loss {r['loss']:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
