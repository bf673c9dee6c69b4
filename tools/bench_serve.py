#!/usr/bin/env python3
"""Seconds per video: `vidax generate` (each run loads its models) against `vidax serve` (models
loaded once), side by side in one run, on the same model and settings.

  tools/bench_serve.py MODEL_DIR [--size 416x240] [--frames 5] [--steps 4] [--videos 3]
                       [--precision bf16] [--vidax build/release/vidax]

Prints one line per side and the ratio of the steady per-video times (generate's mean against
the served jobs after the first, which loads the models). Uses tests/serve/serve_harness.py.
Random real-size weights: `vidax random-model DIR --preset wan2.1-t2v-1.3b --tokenizer ...`."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "serve"))
import serve_harness  # noqa: E402

PROMPT = "a red square moves to the left on a dark blue background"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--size", default="416x240")
    ap.add_argument("--frames", default="5")
    ap.add_argument("--steps", default="4")
    ap.add_argument("--videos", type=int, default=3)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--vidax", default="build/release/vidax")
    a = ap.parse_args()
    serve_harness.VIDAX = a.vidax
    settings = ["--size", a.size, "--frames", a.frames, "--steps", a.steps]
    with tempfile.TemporaryDirectory(prefix="vidax_bench_serve_") as tmp:
        cli = []
        for seed in range(a.videos):
            t0 = time.time()
            subprocess.run([a.vidax, "generate", "--model", a.model, *settings, "--precision",
                            a.precision, "--prompt", PROMPT, "--seed", str(seed), "--no-hash",
                            "-o", os.path.join(tmp, f"cli_{seed}.mp4")],
                           check=True, stderr=subprocess.DEVNULL)
            cli.append(time.time() - t0)
        t0 = time.time()
        server = serve_harness.Server(a.model, os.path.join(tmp, "served"), "--precision",
                                      a.precision, defaults=tuple(settings), threads=0)
        ids = [server.submit(prompt=PROMPT, seed=seed) for seed in range(a.videos)]
        jobs = [server.wait(i, timeout=3600) for i in ids]
        total = time.time() - t0
        rss = server.rss_bytes()
        server.stop()
    runs = [j["timings"]["run_seconds"] for j in jobs]
    print("generate: seconds per video", [round(x, 1) for x in cli])
    print("serve:    seconds per job", [round(x, 1) for x in runs],
          f"(all {a.videos} with the server's start: {total:.1f} s; RSS {rss / 2**30:.1f} GiB)")
    if len(runs) > 1:
        steady = sum(runs[1:]) / len(runs[1:])
        print(f"ratio generate / serve (jobs after the first): {sum(cli) / len(cli) / steady:.2f}")


if __name__ == "__main__":
    main()
