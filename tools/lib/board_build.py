"""A board's app/mnist built under build/<tool>/BOARD, and the last epoch of a run's log: what the tools that
run a board many times (tools/sweep.py, tools/committee.py) share."""
import concurrent.futures
import hashlib
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def board_path(board):
    """configs/BOARD_defconfig's path. Raises ValueError where there is no such board."""
    path = os.path.join(REPO, "configs", f"{board}_defconfig")
    if not os.path.exists(path):
        raise ValueError(f"no board {board} (configs/{board}_defconfig)")
    return path


def build(board, tool, jobs, text=None):
    """configs/BOARD_defconfig's app/mnist, built under build/TOOL/BOARD; its path. With text (a minimal
    config, a variant of a board), that config instead, kept as build/TOOL/B-HASH.defconfig and built
    under build/TOOL/B-HASH (B the board, HASH the text's). Raises ValueError with the reason where there is
    no such board or a make fails."""
    obj = f"build/{tool}/" + (board if text is None else f"{board.partition('+')[0]}-"
                              + hashlib.sha1(text.encode()).hexdigest()[:12])
    if text is None:
        board_path(board)
        configure = [f"{board}_defconfig"]
    else:
        os.makedirs(os.path.join(REPO, "build", tool), exist_ok=True)
        with open(os.path.join(REPO, f"{obj}.defconfig"), "w") as f:
            f.write(text)
        configure = ["defconfig", f"DEFCONFIG={obj}.defconfig"]
    for cmd in (["make", "--no-print-directory", f"O={obj}", *configure],
                ["make", "--no-print-directory", f"O={obj}", f"-j{jobs}", f"{obj}/app/mnist"]):
        done = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise ValueError(f"{board}: {' '.join(cmd)} failed: " + " ".join(done.stdout.strip().splitlines()[-2:]))
    return os.path.join(REPO, obj, "app", "mnist")


def build_all(boards, tool, cpus):
    """{board: app path} of [(board, text or None)], built side by side, four cores a build (the nvcc steps
    of one build do not fill a large host). Raises ValueError with the first failure's reason, once the
    builds under way end; those not started are dropped."""
    jobs = max(1, min(4, cpus))
    pool = concurrent.futures.ThreadPoolExecutor(max(1, cpus // jobs))
    done = {b: pool.submit(build, b, tool, jobs, text) for b, text in boards}
    try:
        for f in concurrent.futures.as_completed(done.values()):
            f.result()
    finally:
        pool.shutdown(cancel_futures=True)
    return {b: f.result() for b, f in done.items()}


def last_epoch(path):
    """The last epoch event of a run's log, or None (also where the run wrote no log)."""
    if not os.path.exists(path):
        return None
    last = None
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "epoch":
                last = e
    return last
