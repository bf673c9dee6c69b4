"""Shared by the planner's check scripts (plan_validate.py, plan_emulate.py): running a command
and the rank correlation of predicted against measured times."""
import os
import subprocess
import sys


def run(cmd, env=None):
    """stdout of `cmd` (with `env` added to the environment); exits naming it on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
    return r.stdout


def spearman(a, b):
    """Spearman's rank correlation of two equally long lists (ties broken by position)."""
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0] * len(v)
        for k, i in enumerate(order):
            r[i] = k
        return r
    n = len(a)
    if n < 2:
        return 1.0
    d2 = sum((x - y) ** 2 for x, y in zip(ranks(a), ranks(b)))
    return 1 - 6 * d2 / (n * (n * n - 1))
