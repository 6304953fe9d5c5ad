#!/usr/bin/env python3
"""Time to accuracy over seeds: a speedrun board's figure.

    tools/time_to_acc.py APP --target 98 [--seeds 5] [--stop-at-target] [--gpus all|N|IDS] [--json OUT]
                         [--logs DIR] [-- MNIST-OPTIONS...]

Runs APP (a built ./app/mnist) once per seed 1..N with --target-acc P
--keep-going --seed S --log DIR/seed-S.jsonl, and any options after "--" (e.g.
--data DIR). Each run records the first score of the watched set (the
validation set, or the test set in a build without one) at or above P, scored
every CONFIG_TRAIN_EVAL_EVERY steps, and trains on to its fixed length, whose
last epoch scores the test set: the result that picks no stopping point on the
test set. Prints a row per seed (where it reached the mark, the steps it took,
its training time: the steps alone by the device's clock; its wall time: since
training began, evaluations included; the test accuracy at the run's end) and
the summary a speedrun reports: how many seeds reached the mark, the mean and
the worst training time of those that did, the mean and worst wall time; and
the fixed-length result: the test accuracy's mean, spread and worst over the
seeds, how many end at or above P, and the whole runs' training time (mean and
worst). --stop-at-target ends each run at the
mark instead (no fixed-length result). One untimed step runs first (unless
--no-warmup), so that the first seed does not pay for the driver's one-time
work: loading the modules, or compiling the PTX of a build for an older GPU.
The seeds run side by side, one a GPU (tools/lib/gpu_pool.py: --gpus, default
every GPU this process may use; seeds beyond the GPUs wait for one), so N seeds
on N GPUs take about one seed's wall time; each row names its GPU. Exits 1 when
a run fails, 0 otherwise (a seed that misses the mark is a result, not a
failure).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
import gpu_pool  # noqa: E402

PROG = "time_to_acc"


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def run_events(path):
    """The run's config event, its target event and its last epoch event (None where absent), from its --log."""
    config = target = epoch = None
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] == "config":
                config = e
            elif e["event"] == "target":
                target = e
            elif e["event"] == "epoch":
                epoch = e
    return config, target, epoch


def seed_cmd(app, seed, target, log, extra, stop):
    return [app, "--target-acc", f"{target:g}", *([] if stop else ["--keep-going"]), "--seed", str(seed), "--log",
            log, *extra]


def seed_result(run, seed, log, app):
    """The run's config, target and last epoch events, or the one error line of a run that failed."""
    if run.returncode != 0:
        fail(f"seed {seed}: {' '.join(run.cmd)} exited with status {run.returncode}: "
             + " ".join(run.output.strip().splitlines()[-2:]))
    config, event, epoch = run_events(log)
    if not event:
        fail(f"seed {seed}: {log} has no target event (is {app} a build with --target-acc?)")
    return config, event, epoch


def summary(rows, goal):
    """How many reached the mark, their times, and where every run trained its whole length, the test accuracy
    at the ends against goal (a fraction, as the engine compares)."""
    reached = [r for r in rows if r["reached"]]
    s = {"seeds": len(rows), "reached": len(reached)}
    if reached:
        train = [r["train_s"] for r in reached]
        wall = [r["wall_s"] for r in reached]
        s.update(mean_train_s=statistics.mean(train), worst_train_s=max(train), mean_wall_s=statistics.mean(wall),
                 worst_wall_s=max(wall), mean_steps=statistics.mean(r["steps"] for r in reached),
                 worst_steps=max(r["steps"] for r in reached))
    ends = [r["end_test_acc"] for r in rows if r["end_test_acc"] is not None]
    if rows and len(ends) == len(rows):  # every run trained its whole length
        s["fixed"] = {"epochs": max(r["end_epoch"] for r in rows), "mean_test_acc": statistics.mean(ends),
                      "sd_test_acc": statistics.stdev(ends) if len(ends) > 1 else 0.0, "worst_test_acc": min(ends),
                      "at_target": sum(a >= goal for a in ends),
                      "mean_train_s": statistics.mean(r["end_train_s"] for r in rows),
                      "worst_train_s": max(r["end_train_s"] for r in rows)}
    return s


def write_json(path, config, target, rows, s):
    """The run's settings, the target (percent), the rows and their summary."""
    keys = ("shape", "batch", "recipe", "device", "target", "step", "precision", "eval_every", "epochs")
    with open(path, "w") as f:
        json.dump({"config": {k: config.get(k) for k in keys}, "target_acc": target, "rows": rows, "summary": s},
                  f, indent=1)


def print_table(config, target, rows, s):
    print(f"{config['shape']} batch {config['batch']} on {config['device']} ({config['target']}, "
          f"{config['step']} step): {config['recipe']}")
    print(f"first crossing: target {target:g} % on the {rows[0]['set']} set, scored every "
          f"{config.get('eval_every', '?')} steps")
    print(" seed  reached  epoch  step   steps  accuracy   train s    wall s  end test  gpu")
    for r in rows:
        end = f"{100 * r['end_test_acc']:7.2f}%" if r["end_test_acc"] is not None else "       -"
        print(f"{r['seed']:5d}  {'yes' if r['reached'] else 'no':>7}  {r['epoch']:5d}  {r['step']:4d}  {r['steps']:6d}  "
              f"{100 * r['acc']:7.2f}%  {r['train_s']:8.4f}  {r['wall_s']:8.3f}  {end}  {r['gpu'] or '-'}")
    line = f"reached by {s['reached']} of {s['seeds']} seeds"
    if s["reached"]:
        line += (f"; training time mean {s['mean_train_s']:.4f} s, worst {s['worst_train_s']:.4f} s; "
                 f"wall time mean {s['mean_wall_s']:.3f} s, worst {s['worst_wall_s']:.3f} s; "
                 f"steps mean {s['mean_steps']:.0f}, worst {s['worst_steps']}")
    print(line)
    if "fixed" not in s:
        print("no fixed-length result: " + ("the runs ended at the mark (--stop-at-target)"
                                            if all(r["end_epoch"] is None for r in rows)
                                            else "a run's log has no epoch at its end"))
    else:
        f = s["fixed"]
        print(f"fixed length, {f['epochs']} epochs, the test set scored at each run's end: mean "
              f"{100 * f['mean_test_acc']:.2f} %, sd {100 * f['sd_test_acc']:.2f}, worst {100 * f['worst_test_acc']:.2f} %; "
              f"{f['at_target']} of {s['seeds']} seeds at or above {target:g} %; training time mean "
              f"{f['mean_train_s']:.4f} s, worst {f['worst_train_s']:.4f} s")


def main():
    argv, extra = gpu_pool.split_run_options(sys.argv[1:])
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("app", help="the built ./app/mnist of a board")
    p.add_argument("--target", type=float, required=True, help="the accuracy to reach, in percent")
    p.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    p.add_argument("--json", help="write the rows and the summary here")
    p.add_argument("--logs", help="keep each seed's --log in this directory (default: a temporary one)")
    p.add_argument("--no-warmup", action="store_true", help="no untimed step before the seeds")
    p.add_argument("--stop-at-target", action="store_true",
                   help="end each run at the mark (no fixed-length result)")
    p.add_argument("--gpus", help="the GPUs to spread the seeds over: all (default), a count, or ids (0,2)")
    args = p.parse_args(argv)
    if not (0 < args.target <= 100):
        fail(f"--target wants a percentage above 0 and at most 100, not {args.target:g}")
    if args.seeds < 1:
        fail(f"--seeds wants at least 1, not {args.seeds}")
    if not os.access(args.app, os.X_OK):
        fail(f"{args.app} is not an executable (build a board first: make BOARD_defconfig && make)")
    try:
        gpus = gpu_pool.choose_gpus(args.gpus, gpu_pool.host_gpus())
    except ValueError as e:
        fail(str(e))
    if not args.no_warmup:  # one step on each GPU, all at once
        for done in gpu_pool.run_spread([[args.app, "--epochs", "1", "--max-steps", "1", *extra]] * max(1, len(gpus)),
                                        gpus):
            if done.returncode != 0:
                fail(f"the warm-up step failed (status {done.returncode}): "
                     + " ".join(done.output.strip().splitlines()[-2:]))
    with tempfile.TemporaryDirectory() as tmp:
        logs = args.logs or tmp
        os.makedirs(logs, exist_ok=True)
        seeds = range(1, args.seeds + 1)
        paths = {seed: os.path.join(logs, f"seed-{seed}.jsonl") for seed in seeds}
        runs = gpu_pool.run_spread([seed_cmd(args.app, seed, args.target, paths[seed], extra, args.stop_at_target)
                                    for seed in seeds], gpus)
        rows, config = [], None
        for seed, run in zip(seeds, runs):
            config, e, last = seed_result(run, seed, paths[seed], args.app)
            whole = not args.stop_at_target and last is not None
            rows.append({"seed": seed, "gpu": run.gpu, **{k: e[k] for k in ("reached", "set", "epoch", "step", "steps",
                                                                             "acc", "train_s", "wall_s")},
                         "end_epoch": last["epoch"] if whole else None,
                         "end_test_acc": last["test_acc"] if whole else None,
                         "end_train_s": last["train_s"] if whole else None,
                         "end_valid_acc": last.get("valid_acc") if whole else None})
    s = summary(rows, args.target / 100)
    print_table(config, args.target, rows, s)
    if args.json:
        write_json(args.json, config, args.target, rows, s)


if __name__ == "__main__":
    main()
