"""Independent runs spread over the host's GPUs: at most one run a GPU at a time, each run seeing only its
own GPU (CUDA_VISIBLE_DEVICES), so K runs on K GPUs take about the wall time of one. Seeds, committee members
and sweeps need no communication between runs; across hosts a scheduler does the same (README, "GPU
scripts": a Slurm job array).

The GPUs are those this process may use: CUDA_VISIBLE_DEVICES's list where it is set, else every GPU
nvidia-smi lists; none (a machine without a GPU, or CUDA_VISIBLE_DEVICES empty) runs one at a time with
the environment as it is."""
import concurrent.futures
import os
import queue
import subprocess
import time


def host_gpus(env=None):
    """The GPU ids this process may use, as strings (CUDA_VISIBLE_DEVICES's, or nvidia-smi's indices)."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",")]
        return [g for g in ids if g and g != "-1"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()] if out.returncode == 0 else []


def choose_gpus(arg, available):
    """--gpus's value against the available ids: 'all', a count N (the first N) or a list of ids ('0,2').
    Returns the ids, or raises ValueError with the reason."""
    if arg in (None, "all"):
        return list(available)
    if arg.isdigit():
        n = int(arg)
        if n < 1 or n > len(available):
            raise ValueError(f"--gpus {n}: this process may use {len(available)} GPU(s) "
                             f"({','.join(available) or 'none'})")
        return list(available[:n])
    ids = [g.strip() for g in arg.split(",")]
    unknown = [g for g in ids if g not in available]
    if unknown or len(set(ids)) != len(ids):
        raise ValueError(f"--gpus {arg}: ids must be distinct and among {','.join(available) or 'none'}")
    return ids


def split_run_options(argv):
    """A runner tool's command line: (its own arguments, the options after "--" that every run gets)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


class Run:
    """One finished job: its command, the GPU it ran on (None: no GPU given), exit status, output, seconds."""

    def __init__(self, cmd, gpu, returncode, output, seconds):
        self.cmd, self.gpu, self.returncode, self.output, self.seconds = cmd, gpu, returncode, output, seconds


def spread_calls(calls, gpus):
    """Calls each call(gpu) with one of `gpus`, at most one call a GPU at a time, every GPU busy while calls
    wait; without GPUs, call(None) one after another. Returns their results, in the calls' order."""
    free = queue.Queue()
    for g in gpus or [None]:
        free.put(g)

    def one(call):
        gpu = free.get()
        try:
            return call(gpu)
        finally:
            free.put(gpu)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(gpus))) as pool:
        return list(pool.map(one, calls))


def run_spread(cmds, gpus, cwd=None):
    """Runs each command (an argv list) as spread_calls does, the command seeing only its GPU. Returns a Run
    per command, in the commands' order."""

    def run(cmd, gpu):
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        t0 = time.monotonic()
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
        return Run(cmd, gpu, done.returncode, done.stdout, time.monotonic() - t0)

    return spread_calls([lambda gpu, cmd=cmd: run(cmd, gpu) for cmd in cmds], gpus)
