#!/usr/bin/python3
"""Loss curves of a vidax-tiny run as a small PNG (numpy + zlib, no plotting library) and a
downsampled CSV for docs/vidax-tiny.md.

    /usr/bin/python3 research/vidax_tiny/plot_loss.py WORK docs/img/vidax-tiny-loss.png docs/img/vidax-tiny-loss.csv

Left panel VAE, right panel DiT (a phase without its WORK/<phase>_loss.csv is left out): x = training step (linear, 0..last), y = log10 loss, grey =
every step, dark = moving average over 25 steps. Horizontal grid lines at every power of ten
and at 2x, 5x (light). The axis ranges are printed so the doc can state them.
"""
import csv
import math
import os
import struct
import sys
import zlib

import numpy as np

W, H, PAD = 360, 240, 12


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return np.array([float(r["step"]) for r in rows]), np.array([float(r["loss"]) for r in rows])


def smooth(y, k=25):
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = np.empty_like(y)
    for i in range(len(y)):
        lo = max(0, i - k + 1)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


def panel(steps, loss):
    img = np.full((H, W, 3), 255, np.uint8)
    ly = np.log10(loss)
    lo, hi = math.floor(ly.min() * 2) / 2, math.ceil(ly.max() * 2) / 2
    to_x = lambda s: PAD + (s - steps.min()) / max(1.0, steps.max() - steps.min()) * (W - 2 * PAD)
    to_y = lambda v: H - PAD - (v - lo) / (hi - lo) * (H - 2 * PAD)
    for p in range(int(math.floor(lo)), int(math.ceil(hi)) + 1):
        for m, shade in ((1, 170), (2, 225), (5, 225)):
            v = p + math.log10(m)
            if lo <= v <= hi:
                img[int(round(to_y(v))), PAD:W - PAD] = shade
    img[PAD:H - PAD, PAD] = 0
    img[H - PAD, PAD:W - PAD] = 0

    def line(xs, ys, color):
        for i in range(len(xs) - 1):
            x0, y0, x1, y1 = to_x(xs[i]), to_y(ys[i]), to_x(xs[i + 1]), to_y(ys[i + 1])
            n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            for t in np.linspace(0, 1, n + 1):
                x, y = int(round(x0 + t * (x1 - x0))), int(round(y0 + t * (y1 - y0)))
                if 0 <= x < W and 0 <= y < H:
                    img[y, x] = color

    line(steps, ly, (190, 190, 190))
    line(steps, np.log10(smooth(loss)), (20, 60, 200))
    return img, (lo, hi)


def write_png(path, img):
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def main():
    work, png, out_csv = sys.argv[1:4]
    panels, rows = [], []
    for name in ("vae", "dit"):
        path = f"{work}/{name}_loss.csv"
        if not os.path.exists(path):  # a WORK that trained only some phases (train.py dit)
            print(f"{name}: no {path}, panel left out")
            continue
        steps, loss = read(path)
        img, (lo, hi) = panel(steps, loss)
        panels.append(img)
        print(f"{name}: steps 0..{int(steps.max())}, log10 loss axis {lo}..{hi} "
              f"(loss {10 ** lo:.3g}..{10 ** hi:.3g})")
        sm = smooth(loss)
        every = max(1, len(steps) // 20)
        for i in list(range(every - 1, len(steps), every)) + ([len(steps) - 1] if (len(steps) - 1) % every != every - 1 else []):
            rows.append([name, int(steps[i]), f"{sm[i]:.5f}"])
    if not panels:
        sys.exit(f"no vae_loss.csv or dit_loss.csv in {work}")
    sep = np.full((H, 8, 3), 255, np.uint8)
    write_png(png, np.concatenate([p for panel_img in panels for p in (panel_img, sep)][:-1], axis=1))
    with open(out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["model", "step", "loss_avg25"])
        wr.writerows(rows)


if __name__ == "__main__":
    main()
