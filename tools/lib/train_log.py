"""The training log, `mnist --log FILE`'s JSON lines: read by tools/plot.py, tools/bench.py and
tools/roofline.py, and written by tools/torch_bench.py --log so that PyTorch runs plot beside staticnn's.

One JSON object per line, each with an "event": "config" (the run's settings),
"step", "epoch" (train_loss, train_acc, test_loss, test_acc, ms, train_s:
training seconds to the end of the epoch, wall_s: seconds since the training
loop began, to the end of the epoch's evaluation), "evaluation" (loss,
accuracy, per_class_accuracy, confusion: rows the true class, columns the
predicted one), "memory", and "error" or "interrupted" where a run ended early.
Logs written before test_* was named val_* are read too.
"""
import json
import math
import statistics


class LogError(Exception):
    """A log that cannot be read; the message names the file, the line where there is one, and the problem."""


# ---- writing -------------------------------------------------------------------


def event(name, **fields):
    return {"event": name, **fields}


def epoch_event(epoch, train_loss, train_acc, test_loss, test_acc, ms, train_s, wall_s, samples):
    """An epoch's figures; samples: how many the epoch trained on."""
    return event("epoch", epoch=epoch, train_loss=train_loss, train_acc=train_acc, test_loss=test_loss,
                 test_acc=test_acc, ms=ms, samples_per_s=samples / (ms / 1e3), train_s=train_s, wall_s=wall_s)


def write(f, events):
    for e in events:
        f.write(json.dumps(e) + "\n")


# ---- reading -------------------------------------------------------------------


def median_after_first(ms):
    """The epoch time a benchmark quotes: the median of the epochs' ms after the first (a warm-up); the
    only one if there is one."""
    return statistics.median(ms[1:] if len(ms) > 1 else ms)


class Run:
    """What a log holds for plotting: its config (a dict, empty if none), its epochs (dicts with
    test_loss and test_acc, and train_s), its last evaluation (or None), and how it ended early:
    stopped (a few words) and ending (a sentence), both None for a run that ended well."""

    def __init__(self, path, config, epochs, evaluation, stopped, ending):
        self.path, self.config, self.epochs, self.evaluation = path, config, epochs, evaluation
        self.stopped, self.ending = stopped, ending


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def read_events(path):
    """[(line number, event)] of a JSON-lines file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise LogError(f"{path}: no such file") from None
    except OSError as e:
        raise LogError(f"{path}: cannot read it: {e.strerror}") from None
    events = []
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            e = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise LogError(f"{path} line {n}: not UTF-8 text, so not a log of JSON lines") from None
        except ValueError as err:
            raise LogError(f"{path} line {n}: not JSON ({err.msg}, column {err.colno})") from None
        if not isinstance(e, dict) or not isinstance(e.get("event"), str):
            raise LogError(f"{path} line {n}: not an event (a JSON object with an \"event\")")
        events.append((n, e))
    return events


def epoch_figures(path, n, e):
    """The epoch event with test_* (from val_* in older logs), its numbers checked."""
    e = dict(e)
    for new, old in (("test_loss", "val_loss"), ("test_acc", "val_acc")):
        if new not in e and old in e:
            e[new] = e[old]
    for key in ("epoch", "train_loss", "train_acc", "test_loss", "test_acc"):
        if not is_number(e.get(key)):
            raise LogError(f"{path} line {n}: the epoch event has no number {key}")
    return e


def add_training_time(path, epochs):
    """train_s where a log has only each epoch's ms: their running sum, which train_s is."""
    if all("train_s" in e for e in epochs):
        return
    total = 0.0
    for e in epochs:
        if not is_number(e.get("ms")):
            raise LogError(f"{path}: epoch {e['epoch']} has neither train_s nor ms")
        total += e["ms"] / 1e3
        e["train_s"] = total


def evaluation_figures(path, n, e):
    """The evaluation event, its confusion matrix checked, per-class accuracy and accuracy filled in if absent."""
    confusion = e.get("confusion")
    classes = len(confusion) if isinstance(confusion, list) else 0
    if classes < 2 or not all(isinstance(row, list) and len(row) == classes and
                              all(isinstance(c, int) and c >= 0 for c in row) for row in confusion):
        raise LogError(f"{path} line {n}: the evaluation event's confusion is not a square matrix of counts")
    e = dict(e)
    totals = [sum(row) for row in confusion]
    if not isinstance(e.get("per_class_accuracy"), list) or len(e["per_class_accuracy"]) != classes:
        e["per_class_accuracy"] = [row[i] / t if t else 0.0 for i, (row, t) in enumerate(zip(confusion, totals))]
    if not is_number(e.get("accuracy")):
        e["accuracy"] = sum(confusion[i][i] for i in range(classes)) / max(1, sum(totals))
    return e


def ending(events):
    """How the run ended early, in a few words and in a sentence, or (None, None)."""
    for _, e in reversed(events):
        if e["event"] == "error":
            return "error", f"ended in an error: {e.get('message', '(no message)')}"
        if e["event"] == "interrupted":
            return (f"interrupted in epoch {e.get('epoch', '?')}",
                    f"was interrupted by {e.get('signal', 'a signal')} in epoch {e.get('epoch', '?')} "
                    f"after step {e.get('step', '?')}")
    return None, None


def read(path):
    """The Run of a log file; LogError if it is missing, not JSON lines, or has nothing to plot."""
    events = read_events(path)
    if not events:
        raise LogError(f"{path}: empty (no events)")
    config = next((e for _, e in events if e["event"] == "config"), {})
    epochs = [epoch_figures(path, n, e) for n, e in events if e["event"] == "epoch"]
    evaluations = [evaluation_figures(path, n, e) for n, e in events if e["event"] == "evaluation"]
    stopped, end = ending(events)
    if not epochs and not evaluations:
        raise LogError(f"{path}: no epoch and no evaluation events, nothing to plot"
                       + (f" (the run {end})" if end else ""))
    add_training_time(path, epochs)
    return Run(path, config, epochs, evaluations[-1] if evaluations else None, stopped, end)
