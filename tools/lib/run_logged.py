"""A command run from the repository root, its output into a log file, killed whole on a timeout: the
builds and runs of tools/bench.py, tools/lab/bench_mm.py and tools/make/tune.py."""
import os
import signal
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # from tools/lib/


def run_logged(cmd, log_path, timeout, mode="w", env=None):
    """Runs cmd from the repository root (in env, else this process's environment), its output to log_path;
    returns an error text or None. On timeout the whole process group goes (compile workers, make's jobs),
    not only cmd."""
    with open(log_path, mode) as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"timed out after {timeout} s"
    return f"exit {rc}" if rc else None
