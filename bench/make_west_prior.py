#!/usr/bin/python3
"""Writes a synthetic WEST prior (.west, format in src/sparse/west_prior.h) for speed benchmarks.

No model is involved: for `vidax bench attention --attention west:FILE:...` at Wan 1.3B shapes
(30 layers x 12 heads) the prior only has to be valid and plausibly shaped, since the bench times
the mask on random q/k/v. Each head's mass from query cell q to key cell k decays with the cell
distance, exp(-(a_t|dt| + a_h|dh| + a_w|dw|)), plus a first-frame anchor (key cells of frame
cell 0 get the mass of distance 1); even heads are "spatial" (a_t = 3, a_h = a_w = 1), odd heads
"temporal" (a_t = 0.5, a_h = a_w = 3); rows are normalized to 1. Deterministic.

usage: /usr/bin/python3 bench/make_west_prior.py OUT.west [--layers 30] [--heads 12] [--grid 4,4,4]
"""
import argparse
import json
import struct

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--grid", default="4,4,4")
    a = ap.parse_args()
    gt, gh, gw = (int(x) for x in a.grid.split(","))
    t, h, w = np.meshgrid(np.arange(gt), np.arange(gh), np.arange(gw), indexing="ij")
    t, h, w = t.ravel(), h.ravel(), w.ravel()  # cell index = (t * gh + h) * gw + w
    dt = np.abs(t[:, None] - t[None, :])
    dh = np.abs(h[:, None] - h[None, :])
    dw = np.abs(w[:, None] - w[None, :])
    heads = []
    for head in range(a.heads):
        at, ahw = (3.0, 1.0) if head % 2 == 0 else (0.5, 3.0)
        m = np.exp(-(at * dt + ahw * (dh + dw)))
        m[:, t == 0] = np.maximum(m[:, t == 0], np.exp(-1.0))  # first-frame anchor
        heads.append(m / m.sum(axis=1, keepdims=True))
    mass = np.stack([np.stack(heads)] * a.layers).astype("<f4")
    header = json.dumps({
        "format": "vidax-west", "version": 1, "layers": a.layers, "heads": a.heads,
        "grid": [gt, gh, gw], "dtype": "F32",
        "calibration": {"synthetic": "locality prior from bench/make_west_prior.py"},
    }).encode()
    with open(a.out, "wb") as f:
        f.write(b"VIDAXWST" + struct.pack("<Q", len(header)) + header + mass.tobytes())


if __name__ == "__main__":
    main()
