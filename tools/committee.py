#!/usr/bin/env python3
"""A committee of K members of one board, trained from K seeds, the runs spread over the host's GPUs.

    tools/committee.py BOARD [--members K] [--sizes K1,K2,...] [--digit-widths W1,W2,...] [--gpus all|N|IDS]
                       [--out DIR] [--app PATH] [--json FILE] [-- MNIST-OPTIONS...]

Builds the board (make O=build/committee/BOARD BOARD_defconfig, then its app/mnist; --app PATH takes a built
one), trains members 1..K with --seed S --save DIR/member-S.st --log DIR/member-S.jsonl and the options after
"--", one run a GPU at a time over --gpus (tools/lib/gpu_pool.py), then scores the committee: app/mnist
--load DIR/member-1.st ... --eval (the mean of the members' probabilities, app/committee.c), with --data where
the options give it (its log: DIR/committee-K.jsonl). Prints a row per member (its validation accuracy where
the build holds a validation split out, its test accuracy, both at the end of its fixed-length run) and the
committee's test loss and accuracy, with its validation accuracy where the build holds the split out (choose
committees on it); --sizes scores the committees of the first K1, K2, ... members too (declared before the
members train, so that no size is picked on the test set). --digit-widths gives member i the i-th width, in
turn (mnist --digit-width W; 0: the digits as they are), so that the members see the digits differently, as
Ciresan et al.'s committees did (on h100_speedrun995 no better than plain ones: docs/PERF.md v41). --json
writes them. Each committee's probabilities stay in DIR/committee-K.test.npy (and .validation.npy):
tools/ensemble.py DIR/committee-K:K OTHER/committee-J:J mixes committees of different boards, member for
member. Exits 1 when a build or a run fails.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
import board_build  # noqa: E402
import gpu_pool  # noqa: E402

PROG = "committee"
MAX_MEMBERS = 64  # app/options.h's SNN_MAX_MEMBERS


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def last_lines(text):
    return " ".join(text.strip().splitlines()[-2:])


def data_option(options):
    """The --data option among a run's options, for the committee's --eval: [] or ["--data", DIR]."""
    for i, o in enumerate(options):
        if o == "--data" and i + 1 < len(options):
            return ["--data", options[i + 1]]
        if o.startswith("--data="):
            return ["--data", o.split("=", 1)[1]]
    return []


def committee_sizes(text, members):
    """--sizes: ascending committee sizes from 2 to members, ending with members (the whole committee)."""
    if text is None:
        return [members]
    try:
        sizes = sorted({int(v) for v in text.split(",")})
    except ValueError:
        fail(f"--sizes wants sizes separated by commas, not {text!r}")
    if sizes[0] < 2 or sizes[-1] > members:
        fail(f"--sizes wants sizes from 2 to --members ({members}), not {text}")
    return sizes if sizes[-1] == members else [*sizes, members]


def digit_widths(text, options):
    """--digit-widths: the widths the members take in turn, each 0 (as read) to 28; [0] without it."""
    if text is None:
        return [0]
    # getopt takes any unambiguous prefix of an option (--di, --digit-w=14)
    if any(len(o.split("=", 1)[0]) > 3 and "--digit-width".startswith(o.split("=", 1)[0]) for o in options):
        fail("the members' widths come from --digit-widths: --digit-width does not go in the run's options")
    try:
        widths = [int(v) for v in text.split(",")]
    except ValueError:
        fail(f"--digit-widths wants widths separated by commas, not {text!r}")
    if not all(0 <= w <= 28 for w in widths):
        fail(f"--digit-widths wants widths from 0 (the digits as they are) to 28, not {text}")
    return widths


def score(app, files, out, data, env):
    """The committee of the files: app --load ... --eval, its test loss and accuracy from its --log, and its
    validation figures where the build holds the split out; its probabilities kept (--probs OUT/committee-K)."""
    k = len(files)
    log = os.path.join(out, f"committee-{k}.jsonl")
    probs = os.path.join(out, f"committee-{k}")
    cmd = [app, *[a for f in files for a in ("--load", f)], "--eval", "--log", log, "--probs", probs, *data]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if done.returncode != 0:
        fail(f"the committee's --eval exited with status {done.returncode}: {last_lines(done.stdout)}")
    with open(log) as f:
        events = [json.loads(line) for line in f]
    evaluation = next((e for e in events if e.get("event") == "evaluation"), None)
    validation = next((e for e in events if e.get("event") == "validation"), {})
    if not evaluation or evaluation.get("members") != k or validation.get("members", k) != k:
        fail(f"{log}: no evaluation of {k} members")
    if not re.search(r"^test set: .*the committee of \d+$", done.stdout, re.M):
        fail("the committee's --eval printed no committee line")
    return {"members": k, "valid_loss": validation.get("loss"), "valid_acc": validation.get("accuracy"),
            "test_loss": evaluation["loss"], "test_acc": evaluation["accuracy"], "probs": probs}


def main():
    argv, extra = gpu_pool.split_run_options(sys.argv[1:])
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("board", help="the board (configs/NAME_defconfig)")
    p.add_argument("--members", type=int, default=5, help=f"members, seeds 1..K (default 5, at most {MAX_MEMBERS})")
    p.add_argument("--sizes", help="also score the committees of the first K1,K2,... members (default: all K)")
    p.add_argument("--digit-widths", help="the widths the members train at, in turn (0: as read; default 0)")
    p.add_argument("--gpus", help="the GPUs to spread the runs over: all (default), a count, or ids (0,2)")
    p.add_argument("--out", help="the members' files and logs (default build/committee/BOARD/members)")
    p.add_argument("--app", help="the board's built app/mnist")
    p.add_argument("--json", help="write the members and the committee here")
    args = p.parse_args(argv)
    if not 2 <= args.members <= MAX_MEMBERS:
        fail(f"--members wants 2 to {MAX_MEMBERS}, not {args.members}")
    sizes = committee_sizes(args.sizes, args.members)
    widths = digit_widths(args.digit_widths, extra)
    try:
        gpus = gpu_pool.choose_gpus(args.gpus, gpu_pool.host_gpus())
    except ValueError as e:
        fail(str(e))
    if args.app:
        if not os.access(args.app, os.X_OK):
            fail(f"--app {args.app}: not an executable")
        app = os.path.abspath(args.app)
    else:
        try:
            app = board_build.build(args.board, PROG, os.cpu_count() or 2)
        except ValueError as e:
            fail(str(e))
    out = args.out or os.path.join(board_build.REPO, "build", PROG, args.board, "members")
    os.makedirs(out, exist_ok=True)
    seeds = range(1, args.members + 1)
    files = {s: os.path.join(out, f"member-{s}.st") for s in seeds}
    logs = {s: os.path.join(out, f"member-{s}.jsonl") for s in seeds}
    width = {s: widths[(s - 1) % len(widths)] for s in seeds}
    runs = gpu_pool.run_spread([[app, "--seed", str(s), "--save", files[s], "--log", logs[s],
                                 *(["--digit-width", str(width[s])] if width[s] else []), *extra] for s in seeds], gpus)
    members = []
    for s, run in zip(seeds, runs):
        if run.returncode != 0:
            fail(f"member {s}: exited with status {run.returncode}: {last_lines(run.output)}")
        e = board_build.last_epoch(logs[s])
        if not e:
            fail(f"member {s}: {logs[s]} has no epoch event")
        members.append({"seed": s, "digit_width": width[s], "gpu": run.gpu, "file": files[s], "epoch": e["epoch"],
                        "valid_acc": e.get("valid_acc"), "test_acc": e["test_acc"], "train_s": e["train_s"]})
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[0]) if gpus else None
    committees = [score(app, [files[s] for s in seeds][:k], out, data_option(extra), env) for k in sizes]
    committee = committees[-1]
    print(f"{args.board}: {args.members} members on {len(gpus) or 'no'} GPU(s) {','.join(gpus)}".rstrip())
    print("| member | seed | digit width | epochs | validation accuracy | test accuracy | training s |")
    print("|---|---|---|---|---|---|---|")
    for i, m in enumerate(members, 1):
        valid = f"{100 * m['valid_acc']:.2f} %" if m["valid_acc"] is not None else "-"
        print(f"| {i} | {m['seed']} | {m['digit_width'] or 'as read'} | {m['epoch']} | {valid} | "
              f"{100 * m['test_acc']:.2f} % | {m['train_s']:.3f} |")
    for c in committees:
        first = statistics.mean(m["test_acc"] for m in members[:c["members"]])
        whole = c is committee
        name, of = ("committee", "the members'") if whole else (f"committee of the first {c['members']}", "their")
        valid = f"validation accuracy {100 * c['valid_acc']:.2f} %, " if c["valid_acc"] is not None else ""
        print(f"{name}: {valid}test accuracy {100 * c['test_acc']:.2f} % ({of} mean {100 * first:.2f} %), "
              f"loss {c['test_loss']:.4f}; probabilities {c['probs']}.*.npy")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"board": args.board, "members": members, "committee": committee, "committees": committees}, f,
                      indent=1)


if __name__ == "__main__":
    main()
