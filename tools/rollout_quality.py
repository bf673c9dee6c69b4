#!/usr/bin/python3
"""Quality proxy for rollout attention/cache variants (docs/rollout.md): per-chunk PSNR and SSIM of
each variant's video against the full-cache rollout of the same model, prompt and seed.

No trained causal model exists here, so this measures only how far a cache policy moves the
rollout away from the full cache (the paper's quality claims need a trained Sparse Forcing
model). Videos are written as PNG folders (lossless), compared frame by frame in RGB; chunk 0 is
9 frames, every later chunk 12.

    /usr/bin/python3 tools/rollout_quality.py --model models/vidax-tiny --force-causal \
        --size 128x128 --seconds 60 --seed 5 \
        --variant 'pbsa=--attention pbsa' \
        --variant 'rolling=--local-attn-size 12 --sink-size 3' --json out.json
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image


def run_video(vidax, common, extra, out_dir):
    cmd = [vidax, "generate"] + common + shlex.split(extra) + ["-o", out_dir + "/"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    names = sorted(n for n in os.listdir(out_dir) if n.endswith(".png"))
    return np.stack([np.asarray(Image.open(os.path.join(out_dir, n)).convert("RGB"))
                     for n in names]).astype(np.float64)


def psnr(a, b):
    mse = np.mean((a - b) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def gaussian_blur(x, sigma=1.5, radius=5):
    t = np.arange(-radius, radius + 1)
    g = np.exp(-t * t / (2 * sigma * sigma))
    g /= g.sum()
    x = np.apply_along_axis(lambda r: np.convolve(r, g, mode="same"), -1, x)
    return np.apply_along_axis(lambda c: np.convolve(c, g, mode="same"), -2, x)


def ssim(a, b):
    """Mean SSIM of two [n, H, W, 3] frame stacks on luma (Gaussian window 11, sigma 1.5)."""
    w = np.array([0.299, 0.587, 0.114])
    ya, yb = a @ w, b @ w
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    ma, mb = gaussian_blur(ya), gaussian_blur(yb)
    va = gaussian_blur(ya * ya) - ma * ma
    vb = gaussian_blur(yb * yb) - mb * mb
    cov = gaussian_blur(ya * yb) - ma * mb
    s = ((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2))
    return float(s.mean())


def chunks(frames):
    out, start = [], 0
    while start < frames:
        n = 9 if start == 0 else 12
        out.append((start, min(start + n, frames)))
        start += n
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vidax", default="build/ci/vidax")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", default="a red ball rolls across a blue floor")
    p.add_argument("--size", default="128x128")
    p.add_argument("--seconds", default="20")
    p.add_argument("--seed", default="5")
    p.add_argument("--force-causal", action="store_true")
    p.add_argument("--variant", action="append", required=True, help="NAME=generate flags")
    p.add_argument("--json")
    a = p.parse_args()
    common = ["--model", a.model, "--rollout", "--prompt", a.prompt, "--size", a.size,
              "--seconds", a.seconds, "--seed", a.seed, "--no-hash"]
    if a.force_causal:
        common.append("--force-causal")
    with tempfile.TemporaryDirectory() as tmp:
        full = run_video(a.vidax, common, "", os.path.join(tmp, "full"))
        report = {"command": common, "frames": int(full.shape[0]), "variants": {}}
        for v in a.variant:
            name, flags = v.split("=", 1)
            video = run_video(a.vidax, common, flags, os.path.join(tmp, name))
            rows = []
            for i, (b, e) in enumerate(chunks(full.shape[0])):
                rows.append({"chunk": i, "psnr": psnr(video[b:e], full[b:e]),
                             "ssim": ssim(video[b:e], full[b:e])})
            report["variants"][name] = {"flags": flags, "chunks": rows}
    print("chunk\t" + "\t".join(f"{n} psnr\t{n} ssim" for n in report["variants"]))
    for i in range(len(chunks(report["frames"]))):
        cells = []
        for n, v in report["variants"].items():
            r = v["chunks"][i]
            cells.append(f"{r['psnr']:.2f}\t{r['ssim']:.4f}")
        print(f"{i}\t" + "\t".join(cells))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
