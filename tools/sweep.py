#!/usr/bin/env python3
"""Boards over seeds, the runs spread over the host's GPUs: a recipe's accuracy as a claim wants it.

    tools/sweep.py BOARD[,BOARD...] [--set SYMBOL=V1[,V2...] ...] [--budget SECONDS] [--seeds 5]
                   [--gpus all|N|IDS] [--out DIR] [--app BOARD=PATH ...] [-- MNIST-OPTIONS...]

Builds each board (make O=build/sweep/BOARD BOARD_defconfig, then its app/mnist; --app BOARD=PATH takes a
built one instead), then runs every board with every seed 1..N, --seed S --log DIR/BOARD/seed-S.jsonl and the
options after "--", one run a GPU at a time over --gpus (tools/lib/gpu_pool.py). --set makes a grid, the
search a recipe is chosen by: every board becomes one variant per combination of the values given, named
BOARD+SYMBOL=V+..., built from the board's defconfig with those symbols set (CONFIG_ may be left off; a string
symbol's value is quoted here; y or n for a bool, where n unsets it; a choice's member is set to y, which
drops its siblings) as build/sweep/B-HASH.defconfig, under build/sweep/B-HASH (B the board, HASH the
config's); a variant's logs go to a folder named as it is, '=' made '-'. --budget SECONDS fits each board's
epochs to that much training time: a 2-epoch timing run of seed 1 first, then every run with --epochs SECONDS
over its second epoch's time (long runs slow down as they go: the fit is a little long). Each run is a fixed-length
run; its last epoch's figures are the result. Prints a row per board: the seeds, the mean and the spread
(sample standard deviation) of the validation accuracy (where the build holds a validation split out: choose
recipes on it) and of the test accuracy (read once, at the end of each run), and the mean training time;
with --json, the runs too. Exits 1 when a build or a run fails.
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
import board_build  # noqa: E402
import gpu_pool  # noqa: E402
import recipe_grid  # noqa: E402

PROG = "sweep"


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def spread(values):
    """(mean, sample standard deviation) of the values, None where there are none."""
    if not values:
        return None
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def cell(ms):
    return f"{100 * ms[0]:.2f} +- {100 * ms[1]:.2f} %" if ms else "-"


def fit_epochs(boards, apps, budget, out, extra, gpus):
    """{board: epochs} for about `budget` seconds of training each: the budget over the second epoch's time of
    a 2-epoch run of seed 1 (the first epoch captures the step and warms up), logged as OUT/BOARD/timing.jsonl.
    Long runs slow down as they go (docs/PERF.md v32: 2-4 % over a run, 6-16 % before AdamW's slow paths were
    removed), so the fit runs over."""
    logs = {b: os.path.join(out, recipe_grid.folder(b), "timing.jsonl") for b in boards}
    runs = gpu_pool.run_spread([[apps[b], "--seed", "1", "--log", logs[b], *extra, "--epochs", "2"] for b in boards],
                               gpus)
    epochs = {}
    for board, run in zip(boards, runs):
        if run.returncode != 0:
            fail(f"{board} timing run: exited with status {run.returncode}: "
                 + " ".join(run.output.strip().splitlines()[-2:]))
        e = board_build.last_epoch(logs[board])
        if not e or e["epoch"] != 2 or not e["ms"] > 0:
            fail(f"{board} timing run: {logs[board]} has no second epoch with a time")
        epochs[board] = max(1, int(budget * 1000 // e["ms"]))
        print(f"{board}: {e['ms']:.2f} ms an epoch -> {epochs[board]} epochs for {budget:g} s of training")
    return epochs


def main():
    argv, extra = gpu_pool.split_run_options(sys.argv[1:])
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("boards", help="board names, comma-separated (configs/NAME_defconfig)")
    p.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    p.add_argument("--gpus", help="the GPUs to spread the runs over: all (default), a count, or ids (0,2)")
    p.add_argument("--out", default="build/sweep/logs", help="where each run's log goes (DIR/BOARD/seed-S.jsonl)")
    p.add_argument("--app", action="append", default=[], metavar="BOARD=PATH", help="a board's built app/mnist")
    p.add_argument("--set", action="append", default=[], metavar="SYMBOL=V1[,V2...]",
                   help="a grid over every board: one variant per combination of the symbols' values")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="fit each board's epochs to SECONDS of training, from a 2-epoch timing run of seed 1")
    p.add_argument("--json", help="write the runs and the rows here")
    args = p.parse_args(argv)
    boards = [b for b in args.boards.split(",") if b]
    if not boards or len(set(boards)) != len(boards):
        fail(f"boards wants distinct names, not '{args.boards}'")
    if args.seeds < 1:
        fail(f"--seeds wants at least 1, not {args.seeds}")
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        fail(f"--budget wants seconds above 0, not {args.budget:g}")
    if args.budget is not None and any(a == "--epochs" or a.startswith("--epochs=") for a in extra):
        fail("--budget fits each board's epochs: --epochs does not go with it")
    try:
        gpus = gpu_pool.choose_gpus(args.gpus, gpu_pool.host_gpus())
    except ValueError as e:
        fail(str(e))
    grid = []
    if args.set:
        if args.app:
            fail("--app takes a built board; --set builds its variants: give one or the other")
        try:
            types = recipe_grid.symbol_types()
            sets = recipe_grid.parse_sets(args.set, types)
        except ValueError as e:
            fail(str(e))
        for board in boards:
            try:
                path = board_build.board_path(board)
            except ValueError as e:
                fail(str(e))
            with open(path) as f:
                base = f.read()
            grid += [(name, recipe_grid.defconfig(base, settings, types))
                     for name, settings in recipe_grid.variants(board, sets)]
        boards = [name for name, _ in grid]
    apps = {}
    for given in args.app:
        board, sep, path = given.partition("=")
        if not sep or board not in boards or not os.access(path, os.X_OK):
            fail(f"--app {given}: wants BOARD=PATH, a board of the list and an executable")
        apps[board] = os.path.abspath(path)
    try:
        apps.update(board_build.build_all(grid or [(b, None) for b in boards if b not in apps], PROG,
                                          os.cpu_count() or 2))
    except ValueError as e:
        fail(str(e))
    for board in boards:
        os.makedirs(os.path.join(args.out, recipe_grid.folder(board)), exist_ok=True)
    epochs = fit_epochs(boards, apps, args.budget, args.out, extra, gpus) if args.budget is not None else {}
    jobs = [(board, seed) for board in boards for seed in range(1, args.seeds + 1)]
    logs = {(b, s): os.path.join(args.out, recipe_grid.folder(b), f"seed-{s}.jsonl") for b, s in jobs}
    runs = gpu_pool.run_spread([[apps[b], "--seed", str(s), "--log", logs[b, s], *extra,
                                 *(["--epochs", str(epochs[b])] if epochs else [])] for b, s in jobs], gpus)
    results = []
    for (board, seed), run in zip(jobs, runs):
        if run.returncode != 0:
            fail(f"{board} seed {seed}: exited with status {run.returncode}: "
                 + " ".join(run.output.strip().splitlines()[-2:]))
        e = board_build.last_epoch(logs[board, seed])
        if not e:
            fail(f"{board} seed {seed}: {logs[board, seed]} has no epoch event")
        results.append({"board": board, "seed": seed, "gpu": run.gpu, "epoch": e["epoch"],
                        "valid_acc": e.get("valid_acc"), "test_acc": e["test_acc"], "train_s": e["train_s"]})
    rows = []
    print(f"{len(jobs)} runs on {len(gpus) or 'no'} GPU(s) {','.join(gpus)}".rstrip())
    if args.set and recipe_grid.fixed(sets):
        print("every variant sets " + ", ".join(recipe_grid.fixed(sets)))
    print("| board | seeds | epochs | validation accuracy | test accuracy | training s |")
    print("|---|---|---|---|---|---|")
    for board in boards:
        mine = [r for r in results if r["board"] == board]
        valid = spread([r["valid_acc"] for r in mine if r["valid_acc"] is not None])
        test = spread([r["test_acc"] for r in mine])
        row = {"board": board, "seeds": len(mine), "epochs": mine[0]["epoch"], "valid_acc": valid, "test_acc": test,
               "train_s": statistics.mean(r["train_s"] for r in mine)}
        rows.append(row)
        print(f"| {board} | {row['seeds']} | {row['epochs']} | {cell(valid)} | {cell(test)} | {row['train_s']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": results, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
