#!/usr/bin/env python3
"""Side-by-side speed of one Wan 2.1 DiT forward: PyTorch eager (bench/torch_wan_dit.py) vs vidax.

Both sides get the same weights file (official names; random weights are generated into a temp
file when --weights is absent and deleted afterwards) and the same problem:
  x        latent [in_dim, (frames-1)/4+1, H/8, W/8] = torch.randn(seed --x-seed, default 1)
  context  [min(--context-tokens (77), text_len), text_dim] = torch.randn(seed --context-seed,
           default 4);  (seeds = those vidax bench dit uses with its torch-compatible randn)
           the model zero-pads it to text_len (512), as the official forward does, so the
           text embedding and cross-attention always work on text_len rows
  t        --t (500), a single timestep
One forward = patch embedding + time/text embeddings + all blocks + head + unpatchify (the
official WanModel.forward). The RoPE table is built once at load time on both sides.

vidax is run as
  VIDAX --threads N bench dit --weights FILE --frames F --size WxH --precision P \
        --iters I --warmup W --json
        [--context-tokens C]
and must print one JSON object with at least: tokens, seconds_per_forward, gflops_per_second,
peak_fraction, peak_rss_bytes. If the binary is missing or the command fails, this script says
so and reports the PyTorch side alone.

Each side runs in its own process, one after the other; its peak RSS is also measured from
outside (wait4 ru_maxrss) and shown next to what it reports.

  python3 bench/compare_dit.py --frames 17 --size 416x240 --precision bf16 --iters 2 --warmup 1
"""

import argparse
import importlib.util
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def dit_flops(cfg, tokens):
    """FLOPs of one Wan 2.1 t2v DiT forward; a multiply-add counts as 2 FLOPs.

    Counts the matrix products only (norms, softmax, RoPE, modulation and other element-wise
    work are left out). With L = tokens, D = dim, T = text_len (512), Fd = ffn_dim:
      per block
        self-attn projections q,k,v,o      2 * L * 4 * D^2
        self-attention QK^T and PV         4 * L * L * D
        cross-attn projections q,o on L,   2 * (L*D^2 + 2*T*D^2 + L*D^2)
          k,v on the T text rows
        cross-attention QK^T and PV        4 * L * T * D
        FFN (two GEMMs)                    2 * L * 2 * D * Fd
      once per forward
        patch embedding                    2 * L * (in_dim*pt*ph*pw) * D
        text embedding (T rows)            2 * T * (text_dim*D + D^2)
        head                               2 * L * D * (out_dim*pt*ph*pw)
    The time MLP (one row, ~34 MFLOP for 1.3B) is left out. The context length does not enter:
    the text is always padded to T rows. Same formula as vidax's WanDit::forward_flops.
    Wan2.1-T2V-1.3B, 17 frames, 416x240 (L = 5*15*26 = 1950): 5.916e12 (5916.15 GFLOP).
    """
    L, D, T, Fd = tokens, cfg["dim"], cfg["text_len"], cfg["ffn_dim"]
    patch = math.prod(cfg["patch_size"])
    per_block = (2 * L * 4 * D * D
                 + 4 * L * L * D
                 + 2 * (L * D * D + 2 * T * D * D + L * D * D)
                 + 4 * L * T * D
                 + 2 * L * 2 * D * Fd)
    once = (2 * L * cfg["in_dim"] * patch * D
            + 2 * T * (cfg["text_dim"] * D + D * D)
            + 2 * L * D * cfg["out_dim"] * patch)
    return cfg["num_layers"] * per_block + once


def tokens_for(cfg, frames, width, height):
    pt, ph, pw = cfg["patch_size"]
    f_lat, h_lat, w_lat = (frames - 1) // 4 + 1, height // 8, width // 8
    return (f_lat // pt) * (h_lat // ph) * (w_lat // pw)


def read_config(path):
    """__metadata__["config"] of a safetensors file, without loading any tensor."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    meta = header.get("__metadata__") or {}
    if "config" not in meta:
        raise SystemExit(f"{path}: no __metadata__['config'] (expected a vidax/Wan weights file)")
    return json.loads(meta["config"])


def run_measured(cmd, timeout):
    """Runs cmd; returns (exit code, stdout, peak RSS bytes, wall seconds, CPU seconds).

    Peak RSS and CPU time (user + system, all threads) come from wait4's rusage.

    stderr is passed through so progress and errors are visible.
    """
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    rc = os.waitstatus_to_exitcode(status)
    p.returncode = rc  # already reaped; keep Popen from waiting again
    return (rc, out.decode("utf-8", "replace"), ru.ru_maxrss * 1024, time.perf_counter() - t0,
            ru.ru_utime + ru.ru_stime)


def last_json_object(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                pass
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def torch_python(requested):
    if requested:
        return requested
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    for cand in ("/usr/bin/python3",):
        if os.path.exists(cand) and subprocess.call(
                [cand, "-c", "import torch"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL) == 0:
            return cand
    return sys.executable


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _add_process_stats(res, rss, wall, cpu, threads):
    res["peak_rss_bytes_wait4"] = rss
    res["process_wall_seconds"] = wall
    res["process_cpu_seconds"] = cpu
    # share of the --threads cores the process got over its whole life (load, warm-up and
    # timed forwards); well below 1 means the machine was busy and the times are inflated
    res["process_cpu_utilization"] = cpu / (wall * threads)


def run_torch(a, py, weights):
    """One run of the PyTorch peer; returns (result dict, None) or (None, error text)."""
    cmd = [py, os.path.join(HERE, "torch_wan_dit.py"), "--bench", "--json",
           "--weights", weights, "--frames", str(a.frames), "--size", a.size,
           "--precision", a.precision, "--iters", str(a.iters), "--warmup",
           str(a.warmup), "--threads", str(a.threads), "--gemm", a.gemm,
           "--context-tokens", str(a.context_tokens), "--t", str(a.t),
           "--x-seed", str(a.x_seed), "--context-seed", str(a.context_seed),
           "--master-weights", a.torch_master_weights]
    log("[compare] torch: " + " ".join(cmd))
    rc, out, rss, wall, cpu = run_measured(cmd, a.timeout)
    res = last_json_object(out)
    if rc or res is None or not res.get("seconds_per_forward"):
        log(f"[compare] torch side failed (exit {rc}); stdout tail:\n{out[-2000:]}")
        return None, f"torch side failed (exit {rc})"
    _add_process_stats(res, rss, wall, cpu, a.threads)
    log(f"[compare] torch: {res['seconds_per_forward']:.3f} s per forward")
    return res, None


def run_vidax(a, vidax_path, weights, context_tokens, tokens, flops):
    """One run of `vidax bench dit`; returns (result dict, None) or (None, error text)."""
    width, height = (int(v) for v in a.size.lower().split("x"))
    cmd = [vidax_path, "--threads", str(a.threads), "bench", "dit", "--weights",
           weights, "--frames", str(a.frames), "--size", f"{width}x{height}",
           "--precision", a.precision, "--iters", str(a.iters), "--warmup",
           str(a.warmup), "--json"]
    if a.vidax_context_tokens:
        cmd += ["--context-tokens", str(context_tokens)]
    log("[compare] vidax: " + " ".join(cmd))
    rc, out, rss, wall, cpu = run_measured(cmd, a.timeout)
    res = last_json_object(out)
    if rc or res is None or not res.get("seconds_per_forward"):
        msg = (f"vidax 'bench dit' failed (exit {rc}) or printed no JSON object with "
               f"seconds_per_forward; reporting the PyTorch side only")
        log(f"[compare] {msg}; stdout tail:\n{out[-2000:]}")
        return None, msg
    _add_process_stats(res, rss, wall, cpu, a.threads)
    if res.get("tokens") not in (None, tokens):
        log(f"[compare] WARNING: vidax reports {res.get('tokens')} tokens, expected {tokens}")
    vf = res.get("flops_per_forward", res.get("flops"))
    if vf and abs(vf - flops) > 1e-3 * flops:
        log(f"[compare] WARNING: vidax counts {vf:.4g} FLOP per forward, this script "
            f"{flops:.4g}; GFLOP/s are not comparable")
    if "seconds_min" not in res and "best_seconds" in res:
        res["seconds_min"] = res["best_seconds"]
    log(f"[compare] vidax: {res['seconds_per_forward']:.3f} s per forward")
    return res, None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=17)
    p.add_argument("--size", default="416x240", help="WIDTHxHEIGHT of the video")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vidax", default="build/release/vidax", help="path to the vidax binary")
    p.add_argument("--weights", help="weights file; random ones are generated when absent")
    p.add_argument("--config", default="wan2.1-t2v-1.3b",
                   help="config for generated weights (see make_random_wan_weights.py)")
    p.add_argument("--x-seed", type=int, default=1, help="latent seed (weights use seed 0)")
    p.add_argument("--context-seed", type=int, default=4, help="text context seed")
    p.add_argument("--context-tokens", type=int, default=77)
    p.add_argument("--t", type=float, default=500.0)
    p.add_argument("--gemm", choices=["mkldnn", "native"], default="mkldnn",
                   help="torch float32 GEMM backend (see torch_wan_dit.py)")
    p.add_argument("--torch-master-weights", choices=["bf16", "f32"], default="bf16",
                   help="bf16 mode: the peer's linear weights cast to bf16 once (default, the "
                        "faster peer) or kept f32 and cast by autocast per call (official)")
    p.add_argument("--python",
                   help="interpreter with torch (default: this one, else /usr/bin/python3)")
    p.add_argument("--tmpdir", help="where to put generated weights (default: system temp dir)")
    p.add_argument("--no-vidax-context-tokens", dest="vidax_context_tokens",
                   action="store_false",
                   help="do not pass --context-tokens to vidax (for builds without it)")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--skip-vidax", action="store_true")
    p.add_argument("--timeout", type=float, default=7200, help="per process, seconds")
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate torch/vidax runs this many times; report each side's "
                        "fastest round (use on a busy machine)")
    p.add_argument("--json", action="store_true", help="print one combined JSON object")
    p.add_argument("--save", metavar="FILE", help="also write the combined JSON object to FILE")
    a = p.parse_args(argv)

    width, height = (int(v) for v in a.size.lower().split("x"))
    py = torch_python(a.python)
    tmp_weights = None
    result = {"frames": a.frames, "size": f"{width}x{height}", "precision": a.precision,
              "threads": a.threads, "iters": a.iters, "warmup": a.warmup, "t": a.t,
              "context_tokens": a.context_tokens, "x_seed": a.x_seed,
              "context_seed": a.context_seed}
    try:
        weights = a.weights
        if not weights:
            fd, tmp_weights = tempfile.mkstemp(suffix=".safetensors", prefix="wan_random_",
                                               dir=a.tmpdir)
            os.close(fd)
            log(f"[compare] generating random {a.config} weights (bf16) -> {tmp_weights}")
            rc = subprocess.call([py, os.path.join(HERE, "make_random_wan_weights.py"),
                                  "--config", a.config, "--dtype", "bf16", "--seed", "0",
                                  "--out", tmp_weights])
            if rc:
                raise SystemExit(f"weight generation failed (exit {rc})")
            weights = tmp_weights
        cfg = read_config(weights)
        tokens = tokens_for(cfg, a.frames, width, height)
        result["context_tokens"] = min(a.context_tokens, cfg["text_len"])
        flops = dit_flops(cfg, tokens)
        result.update({"weights": weights if not tmp_weights else f"(generated {a.config})",
                       "config": cfg, "tokens": tokens, "flops": flops})
        log(f"[compare] L = {tokens} tokens, {flops / 1e12:.3f} TFLOP per forward")

        vidax_path = shutil.which(a.vidax) or (a.vidax if os.path.isfile(a.vidax) else None)
        if not a.skip_vidax and (not vidax_path or not os.access(vidax_path, os.X_OK)):
            msg = (f"vidax binary not found at '{a.vidax}' (build it, e.g. "
                   f"cmake --preset release && cmake --build build/release, or pass --vidax); "
                   f"reporting the PyTorch side only")
            log("[compare] " + msg)
            result["vidax_error"] = msg
            vidax_path = None
        if a.skip_vidax:
            vidax_path = None

        # Alternate the sides so that both see the same background load; keep each side's
        # fastest round (on a shared machine the minimum is the least disturbed figure).
        torch_res = vidax_res = None
        torch_all, vidax_all = [], []
        for rnd in range(a.rounds):
            if not a.skip_torch:
                r, err = run_torch(a, py, weights)
                if err:
                    result["torch_error"] = err
                else:
                    torch_all.append(r["seconds_per_forward"])
                    if torch_res is None or r["seconds_per_forward"] < torch_res[
                            "seconds_per_forward"]:
                        torch_res = r
            if vidax_path:
                r, err = run_vidax(a, vidax_path, weights, result["context_tokens"], tokens,
                                   flops)
                if err:
                    result["vidax_error"] = err
                else:
                    vidax_all.append(r["seconds_per_forward"])
                    if vidax_res is None or r["seconds_per_forward"] < vidax_res[
                            "seconds_per_forward"]:
                        vidax_res = r
        if a.rounds > 1:
            result["torch_rounds_seconds"] = torch_all
            result["vidax_rounds_seconds"] = vidax_all
        result["torch"] = torch_res
        result["vidax"] = vidax_res

        ts = (torch_res or {}).get("seconds_per_forward")
        vs = (vidax_res or {}).get("seconds_per_forward")
        result["ratio_torch_over_vidax"] = ts / vs if ts and vs else None
    finally:
        if tmp_weights and os.path.exists(tmp_weights):
            os.unlink(tmp_weights)

    if a.save:
        with open(a.save, "w") as f:
            json.dump(result, f, indent=1)
    if a.json:
        print(json.dumps(result))
        return 0 if (result["torch"] or result["vidax"]) else 1

    def row(name, key, spec, scale=1.0):
        vals = []
        for side in (result["torch"], result["vidax"]):
            v = None if side is None else side.get(key)
            if v is not None and scale != 1.0:
                v = v * scale
            vals.append(fmt(v, spec))
        print(f"{name:28s} {vals[0]:>16s} {vals[1]:>16s}")

    print(f"Wan DiT forward: {result['config'].get('dim')}-dim x "
          f"{result['config'].get('num_layers')} layers, {a.frames} frames {width}x{height}, "
          f"L = {tokens} tokens, {flops / 1e12:.3f} TFLOP, {a.precision}, "
          f"{a.threads} threads")
    print(f"{'':28s} {'torch eager':>16s} {'vidax':>16s}")
    row("tokens", "tokens", "d")
    row("seconds / forward (mean)", "seconds_per_forward", ".3f")
    row("seconds / forward (min)", "seconds_min", ".3f")
    row("GFLOP/s", "gflops_per_second", ".1f")
    row("peak fraction", "peak_fraction", ".3f")
    row("peak RSS, reported (GiB)", "peak_rss_bytes", ".2f", 1 / 2**30)
    row("peak RSS, wait4 (GiB)", "peak_rss_bytes_wait4", ".2f", 1 / 2**30)
    row("CPU use of --threads cores", "process_cpu_utilization", ".2f")
    r = result["ratio_torch_over_vidax"]
    print(f"{'torch_seconds / vidax_seconds':28s} {fmt(r, '.2f'):>16s}")
    if "vidax_error" in result:
        print(f"note: {result['vidax_error']}")
    return 0 if (result["torch"] or result["vidax"]) else 1


if __name__ == "__main__":
    sys.exit(main())
