"""A board's app/mnist built under build/<tool>/BOARD, and the last epoch of a run's log: what the tools that
run a board many times (tools/sweep.py, tools/committee.py) share."""
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(board, tool, jobs):
    """configs/BOARD_defconfig's app/mnist, built under build/TOOL/BOARD; its path. Raises ValueError with
    the reason where there is no such board or a make fails."""
    obj = f"build/{tool}/{board}"
    if not os.path.exists(os.path.join(REPO, "configs", f"{board}_defconfig")):
        raise ValueError(f"no board {board} (configs/{board}_defconfig)")
    for cmd in (["make", "--no-print-directory", f"O={obj}", f"{board}_defconfig"],
                ["make", "--no-print-directory", f"O={obj}", f"-j{jobs}", f"{obj}/app/mnist"]):
        done = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise ValueError(f"{board}: {' '.join(cmd)} failed: " + " ".join(done.stdout.strip().splitlines()[-2:]))
    return os.path.join(REPO, obj, "app", "mnist")


def last_epoch(path):
    """The last epoch event of a run's log, or None."""
    last = None
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "epoch":
                last = e
    return last
