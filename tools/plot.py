#!/usr/bin/env python3
"""Training curves and confusion matrices of `mnist --log` (or tools/torch_bench.py --log) files.

    tools/plot.py [--out DIR] [--label NAME]... LOG...

Writes into DIR (default build/plots), and prints the path of each file:
  curves-epoch.png    loss (log scale) and accuracy against the epoch
  curves-time.png     the same against training time (train_s: the epochs'
                      training alone) and, for the logs that record it, wall
                      time (wall_s: since the training loop began, evaluations
                      included); on a log scale where one run takes ten
                      times as long as another
  confusion-NAME.png  for each log with an evaluation event (NAME: the log's
                      file name without its extension): counts in the cells,
                      colour by the share of the true class, each class's
                      accuracy beside its row
Train curves are solid, validation curves dotted (a run with a held-out split,
CONFIG_TRAIN_VALIDATION_SIZE), test curves dashed, one colour and marker per run
(at most 40 markers a curve). Where a run has 50 epochs or more, the accuracy
axis starts just below every figure after the runs' first twentieth: the end
of a long run, where runs differ by tenths of a point, stays readable. A
run's label is the next --label (one per LOG, in order), else target, shape
and precision from its config (with the file name where two runs would share
a label, or where there is no config). A run that ended in an error or was
interrupted is drawn as far as it got, and its label says so. A missing
file, a line that is not JSON, or a log with no epoch and no evaluation
event: one error line, exit 1.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
import train_log  # noqa: E402

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mticker
except ImportError:
    sys.exit(f"plot: error: matplotlib is not installed for {sys.executable} "
             f"(Debian: apt-get install python3-matplotlib, then /usr/bin/python3 tools/plot.py)")

PROG = "plot"
FASHION_CLASSES = ("T-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")
STYLES = {"train": "-", "valid": ":", "test": "--"}  # line styles of the sets
MARKERS = "os^Dv<>P"  # one per run: where runs coincide, the markers still tell them apart
MARKS = 40  # at most this many markers a curve
LONG_RUN = 50  # epochs: from here the accuracy axis leaves out each run's first twentieth
DPI = 120


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def labels_for(runs, given):
    """--label in order, then each run's own: target, shape, precision, or its file name; a label two runs
    would share gets the file name added."""
    own = [" ".join(str(run.config[k]) for k in ("target", "shape", "precision") if run.config.get(k))
           or os.path.basename(run.path) for run in runs]
    shared = {label for label in own if own.count(label) > 1}
    own = [f"{label} ({os.path.basename(run.path)})" if label in shared and label != os.path.basename(run.path)
           else label for label, run in zip(own, runs)]
    labels = list(given) + own[len(given):]
    return [label + (f" [{run.stopped}]" if run.stopped else "") for label, run in zip(labels, runs)]


def log_scale(ax, axis):
    """ax's "x" or "y" axis on a log scale, with the values themselves (0.05, 0.1, 0.2) on the ticks
    rather than powers of ten."""
    getattr(ax, f"set_{axis}scale")("log")
    ticks = getattr(ax, f"{axis}axis")
    ticks.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
    ticks.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ticks.set_minor_formatter(mticker.NullFormatter())


def sets_of(run):
    """The sets the run's epochs score, in the order drawn: train, validation where every epoch has it, test."""
    return [key for key in STYLES if all(f"{key}_acc" in e and f"{key}_loss" in e for e in run.epochs)]


def draw_run(axes, run, x_key, look):
    """The run's loss and accuracy curves of each of its sets on (loss axis, accuracy axis) against x_key;
    look: its colour and marker."""
    epochs = [e for e in run.epochs if x_key in e]
    x = [e[x_key] for e in epochs]
    loss_ax, acc_ax = axes
    look = dict(look, markevery=max(1, -(-len(x) // MARKS)))  # a long run's markers would hide its line
    for key in sets_of(run):
        loss_ax.plot(x, [e[f"{key}_loss"] for e in epochs], STYLES[key], **look)
        acc_ax.plot(x, [100 * e[f"{key}_acc"] for e in epochs], STYLES[key], **look)


def accuracy_floor(runs):
    """Where a long run's accuracy axis starts: below everything after its first twentieth, so that the end of
    the run, where the runs differ by tenths of a point, is not flattened by its first epochs; None for runs
    shorter than LONG_RUN epochs."""
    if max(len(run.epochs) for run in runs) < LONG_RUN:
        return None
    low = min(100 * e[f"{key}_acc"] for run in runs for key in sets_of(run)
              for e in run.epochs[max(1, len(run.epochs) // 20):])
    return low - 0.1 * (100 - low)


def curves_figure(path, runs, labels, rows, title):
    """One row of (loss, accuracy) panels per (x key, x label) in rows; the legends below."""
    legend_rows = max(2, len(runs))
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 4.2 * len(rows) + 0.6 + 0.25 * legend_rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # the first run on top: where runs coincide, each shows its marker within the next's
    looks = [dict(color=colors[i % len(colors)], marker=MARKERS[i % len(MARKERS)], ms=5, mfc="none",
                  zorder=3 - i / len(runs)) for i in range(len(runs))]
    # a GPU run beside a host run: on a linear time axis the fast one would sit in a corner
    ends = [run.epochs[-1][x_key] for x_key, _ in rows if x_key != "epoch" for run in runs if x_key in run.epochs[-1]]
    log_time = bool(ends) and max(ends) > 10 * min(ends)
    zoom = accuracy_floor(runs)
    for row, (x_key, x_label) in zip(axes, rows):
        for i, run in enumerate(runs):
            draw_run(row, run, x_key, looks[i])
        loss_ax, acc_ax = row
        log_scale(loss_ax, "y")
        loss_ax.set_ylabel("cross-entropy loss (log scale)")
        acc_ax.set_ylabel("accuracy (%)")
        if zoom is not None:
            acc_ax.set_ylim(bottom=zoom, top=100)
        acc_ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        for ax in row:
            ax.set_xlabel(x_label + (" (log scale)" if log_time and x_key != "epoch" else ""))
            ax.grid(True, which="major", alpha=0.35)
            if x_key == "epoch":
                ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
            elif log_time:
                log_scale(ax, "x")
            else:
                ax.set_xlim(left=0)
    axes[0][0].set_title("loss")
    axes[0][1].set_title("accuracy")
    fig.suptitle(title)
    fig.legend([plt.Line2D([], [], lw=2, **look) for look in looks], labels, loc="lower right",
               bbox_to_anchor=(0.49, 0), frameon=False, fontsize="small")
    drawn = {key for run in runs for key in sets_of(run)}
    words = {"train": "train (mean over the epoch's steps)", "valid": "validation (held out, after the epoch)",
             "test": "test (after the epoch)"}
    fig.legend([plt.Line2D([], [], color="k", ls=STYLES[key]) for key in STYLES if key in drawn],
               [words[key] for key in STYLES if key in drawn], loc="lower left",
               bbox_to_anchor=(0.51, 0), frameon=False, fontsize="small")
    fig.tight_layout(rect=(0, (0.25 * legend_rows + 0.15) / fig.get_figheight(), 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def class_names(run, classes):
    if str(run.config.get("dataset", "")).lower() == "fashion-mnist" and classes == len(FASHION_CLASSES):
        return FASHION_CLASSES
    return [str(c) for c in range(classes)]


def confusion_figure(path, run, label):
    """Counts annotated, cells coloured by the row's share (log scale, so that the rare mistakes show)."""
    ev = run.evaluation
    counts = ev["confusion"]
    classes = len(counts)
    shares = [[c / max(1, sum(row)) for c in row] for row in counts]
    names = class_names(run, classes)
    fig, ax = plt.subplots(figsize=(8.2, 7))
    smallest = min((s for row in shares for s in row if s > 0), default=1e-3)
    norm = mcolors.LogNorm(vmin=min(smallest, 1e-3) / 3, vmax=1)  # a single mistake still shows a tint
    cmap = plt.get_cmap("Blues").copy()
    cmap.set_bad("white")
    masked = [[s if s > 0 else float("nan") for s in row] for row in shares]
    image = ax.imshow(masked, cmap=cmap, norm=norm)
    for i, row in enumerate(counts):
        for j, c in enumerate(row):
            dark = shares[i][j] > 0 and norm(shares[i][j]) > 0.6
            ax.text(j, i, str(c), ha="center", va="center", fontsize="small" if c < 10000 else "x-small",
                    color="white" if dark else "black" if c else "#bbbbbb")
    ax.set_xticks(range(classes), names, rotation=45 if names is FASHION_CLASSES else 0)
    ax.set_yticks(range(classes), [f"{n}  {100 * a:.1f}%" for n, a in zip(names, ev["per_class_accuracy"])])
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class, and its accuracy")
    loss = f", loss {ev['loss']:.4f}" if train_log.is_number(ev.get("loss")) else ""
    ax.set_title(f"{label}\n{ev.get('set', 'test')} set: accuracy {100 * ev['accuracy']:.2f}%{loss}, "
                 f"{sum(map(sum, counts))} samples")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{100 * v:g}%"))
    bar.set_label("share of the true class (log scale; white: none)")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def confusion_names(runs):
    """confusion-STEM.png per run, numbered where two logs share a file name."""
    stems = [stem(run.path) for run in runs]
    return [f"confusion-{s}.png" if stems.count(s) == 1 else f"confusion-{s}-{i + 1}.png"
            for i, s in enumerate(stems)]


def parse_args():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[3:]))
    p.add_argument("logs", nargs="+", metavar="LOG", help="a --log file (JSON lines)")
    p.add_argument("--out", metavar="DIR", default="build/plots", help="directory for the PNGs (default build/plots)")
    p.add_argument("--label", action="append", default=[], metavar="NAME",
                   help="the next log's name in the legends (once per log, in order)")
    args = p.parse_args()
    if len(args.label) > len(args.logs):
        p.error(f"{len(args.label)} --label for {len(args.logs)} log(s)")
    return args


def main():
    args = parse_args()
    try:
        runs = [train_log.read(path) for path in args.logs]
    except train_log.LogError as e:
        sys.exit(f"{PROG}: error: {e}")
    labels = labels_for(runs, args.label)
    for run in runs:
        if run.ending:
            print(f"{PROG}: note: {run.path}: the run {run.ending}; plotted as far as it got", file=sys.stderr)
    trained = [(run, label) for run, label in zip(runs, labels) if run.epochs]
    no_wall = [run.path for run, _ in trained if not all("wall_s" in e for e in run.epochs)]
    if no_wall:
        print(f"{PROG}: note: no wall_s in {', '.join(no_wall)}: "
              + ("not in the wall-time panels" if len(no_wall) < len(trained) else "no wall-time panels"),
              file=sys.stderr)

    written = []
    try:
        os.makedirs(args.out, exist_ok=True)
        if trained:
            curve_runs, curve_labels = zip(*trained)
            path = os.path.join(args.out, "curves-epoch.png")
            curves_figure(path, curve_runs, curve_labels, [("epoch", "epoch")], "Loss and accuracy per epoch")
            written.append(path)
            rows = [("train_s", "training time (s): the epochs' training steps alone")]
            if len(no_wall) < len(trained):
                rows.append(("wall_s", "wall time (s) since training began, evaluations included"))
            path = os.path.join(args.out, "curves-time.png")
            curves_figure(path, curve_runs, curve_labels, rows, "Loss and accuracy against time")
            written.append(path)
        for run, label, name in zip(runs, labels, confusion_names(runs)):
            if run.evaluation:
                path = os.path.join(args.out, name)
                confusion_figure(path, run, label)
                written.append(path)
    except OSError as e:
        sys.exit(f"{PROG}: error: cannot write {e.filename or args.out}: {e.strerror}")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
