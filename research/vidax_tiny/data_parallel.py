"""Data parallelism over local processes for the vidax-tiny trainers (`train.py --procs N`).

PyTorch eager on this machine gets nothing from a second OpenMP thread at the DiT's sizes (one
step takes the same 3.1 s with one or two threads), but half a batch takes half the time. So N
processes of one thread each draw the same whole batch from the step's generator, each computes
the loss of its own slice (scaled so the slices' losses add up to the whole batch's), and their
gradients are summed with torch.distributed's gloo backend before every optimiser step. Every
process then takes the same step, so the run follows the single-process trajectory up to the
order of float summation, and rank 0 alone writes logs, checkpoints and results.

Ranks 1..N-1 are forked children of rank 0: they share its command line (so `pkill -f` on the
run stops them too) and they die with it (PR_SET_PDEATHSIG).
"""
import ctypes
import datetime
import os
import shutil
import signal
import sys
import tempfile
import threading
import traceback

import torch
import torch.distributed as dist

_PR_SET_PDEATHSIG = 1


class Group:
    """This process's place among `size` data-parallel processes (size 1: no communication)."""

    def __init__(self, rank=0, size=1):
        self.rank, self.size = rank, size

    @property
    def main(self):
        return self.rank == 0

    def shard(self, n):
        """The slice of a batch of n rows this process computes (contiguous, sizes differ by at
        most one; empty when n < size)."""
        return slice(self.rank * n // self.size, (self.rank + 1) * n // self.size)

    def share(self, n):
        """The fraction of a batch of n rows in this process's shard."""
        s = self.shard(n)
        return (s.stop - s.start) / n

    def sum_grads(self, params, loss):
        """Sums every parameter's gradient and the loss over the processes (one all-reduce);
        returns the whole batch's loss as a float. Parameters without a gradient count as zero
        so every process packs the same buffer."""
        if self.size == 1:
            return float(loss)
        params = list(params)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float()
                          for p in params] + [loss.detach().float().reshape(1)])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).to(p.dtype)  # flat is new every step
            offset += n
        return float(flat[-1])


def _die_with_parent(parent):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _join(store, rank, size):
    # The loopback device: gloo otherwise resolves the host name, which need not resolve here.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))


def _watch(rank, pid, state, tmp):
    """Reaps one child; a child that fails while rank 0 still runs stops the whole run at once
    (rank 0 would otherwise wait in gloo until its timeout). A checkpoint write cut short
    leaves the previous checkpoint: train.py's save_atomic renames a finished file."""
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    state[rank] = code
    if code != 0 and not state.get("stopping"):
        sys.stderr.write(f"data parallel: worker process {rank} failed (exit status {code}); "
                         "stopping the run\n")
        sys.stderr.flush()
        shutil.rmtree(tmp, ignore_errors=True)
        os._exit(1)


PREFIX = "vidax-tiny-dp-"


def sweep_stale_folders(parent=None):
    """Removes the temporary folders of earlier runs whose rank 0 is gone (a SIGKILL leaves its
    folder behind: no cleanup code runs). Each folder is named after its rank 0's pid."""
    parent = parent or tempfile.gettempdir()
    for name in os.listdir(parent):
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except PermissionError:  # alive, another user's
            pass


def run(size, fn):
    """Runs fn(group) in `size` processes and returns rank 0's result."""
    if size < 1:
        raise SystemExit(f"--procs: expected a positive number of processes, got {size}")
    if size == 1:
        return fn(Group())
    sweep_stale_folders()
    tmp = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    store = os.path.join(tmp, "store")
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    state, pids, watchers = {}, {}, []
    for rank in range(1, size):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _die_with_parent(parent)
                sys.stdout = open(os.devnull, "w")  # rank 0 logs for everyone
                _join(store, rank, size)
                fn(Group(rank, size))
                code = 0
            except SystemExit as e:  # a check failed (rank 0 most likely fails it too)
                if isinstance(e.code, int):
                    code = e.code
                else:
                    sys.stderr.write(f"{e.code}\n")
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids[rank] = pid
    # Started after the last fork: a child gets a copy of the forking thread only.
    for rank, pid in pids.items():
        watchers.append(threading.Thread(target=_watch, args=(rank, pid, state, tmp), daemon=True))
        watchers[-1].start()
    try:
        _join(store, 0, size)
        return fn(Group(0, size))
    except BaseException:
        state["stopping"] = True
        for rank, pid in pids.items():
            if rank not in state:  # still running
                os.kill(pid, signal.SIGTERM)
        raise
    finally:
        for w in watchers:
            w.join()
        if dist.is_initialized():
            dist.destroy_process_group()
        shutil.rmtree(tmp, ignore_errors=True)
