#!/usr/bin/env python3
"""Projected seconds per guided denoising step of Wan 2.1 on N devices under vidax's meshes.

A projection, not a measurement: compute time is the forward's FLOPs (the formula of
WanDit::forward_flops) at a stated fraction of a device's published bf16 peak, split evenly
over the sequence ranks; communication time is the bytes vidax's mesh sends per rank (the formula
of wan::dit_comm_bytes, src/models/wan/dit_comm_model.cpp, which `vidax bench dit --mesh` checks
against the bytes the process groups counted) over a published per-device link bandwidth, plus a
per-collective latency (`vidax bench comm` measures both on the machine at hand). Nothing
overlaps communication with compute (vidax does not yet), so this is an upper bound for the mesh.

    tools/mesh_projection.py [--latency-us 20] [--efficiency 0.5]
"""
import argparse
import math

MODELS = {  # dim, heads, ffn, layers, text_len, patch volume x out channels, bf16 weight GiB
    "1.3B": dict(dim=1536, heads=12, ffn=8960, layers=30, text=512, out=64, weights=2.64),
    "14B": dict(dim=5120, heads=40, ffn=13824, layers=40, text=512, out=64, weights=26.6),
}
SHAPES = {"480p x 81": (21, 60, 104), "720p x 81": (21, 90, 160)}  # latent F, H, W
DEVICES = {  # bf16 peak FLOP/s, per-device bandwidth per direction (bytes/s), memory GiB
    # NVIDIA H100 SXM datasheet: 989 TFLOP/s dense bf16, 900 GB/s NVLink, 80 GB.
    "H100 SXM, NVLink 4 (NVSwitch)": (989e12, 450e9, 80),
    # Cloud TPU v5e docs: 197 TFLOP/s bf16, 400 GB/s bidirectional ICI per chip, 16 GB HBM.
    "TPU v5e, ICI": (197e12, 200e9, 16),
}


def forward_flops(m, L):
    d, tl, f = m["dim"], m["text"], m["ffn"]
    per_block = 2 * L * 4 * d * d + 4 * L * L * d + 2 * (2 * L * d * d + 2 * tl * d * d) \
        + 4 * L * tl * d + 2 * L * 2 * d * f
    return per_block * m["layers"]


def comm_bytes(m, L, cfg, ring, uly, act=2):
    """Bytes one rank sends per guided step (both branches; one forward per rank under cfg=2)."""
    sp = ring * uly
    lr = math.ceil(L / sp)
    d, layers = m["dim"], m["layers"]
    per_forward = 0.0
    if uly > 1:
        per_forward += layers * 4 * lr * d * (uly - 1) / uly * act
    if ring > 1:
        per_forward += layers * 2 * lr * d * (ring - 1) * act
    if sp > 1:
        per_forward += lr * m["out"] * 4 * (sp - 1)
    forwards = 1 if cfg == 2 else 2
    prediction_bytes = 16 * 4 * L * 4  # [16, F, H, W] f32: 4 latent pixels per token
    return per_forward * forwards + (prediction_bytes if cfg == 2 else 0), forwards


def collectives(m, cfg, ring, uly):
    per_forward = m["layers"] * (2 * (uly > 1) + (ring - 1)) + (ring * uly > 1)
    return per_forward * (1 if cfg == 2 else 2) + (cfg == 2)


def meshes(n, heads):
    for cfg in (1, 2):
        for uly in range(1, n + 1):
            if n % (cfg * uly) or heads % uly:
                continue
            yield cfg, n // (cfg * uly), uly


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-us", type=float, default=20.0)
    ap.add_argument("--efficiency", type=float, default=0.5, help="fraction of bf16 peak")
    a = ap.parse_args()
    print("| model, shape | devices | N | best mesh | compute s | comm s | step s | speed-up vs 1 "
          "| weights fit? |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mname, m in MODELS.items():
        for sname, (f, h, w) in SHAPES.items():
            L = f * h * w // 4
            step_flops = 2 * forward_flops(m, L)
            for dname, (peak, bw, mem) in DEVICES.items():
                # Every rank holds all the weights until tensor parallelism exists.
                fits = "yes" if m["weights"] * 1.3 < mem else "no: needs tp / sharded weights"
                t1 = step_flops / (peak * a.efficiency)
                for n in (8, 16, 64):
                    best = None
                    for cfg, ring, uly in meshes(n, m["heads"]):
                        compute = t1 / n
                        b, _ = comm_bytes(m, L, cfg, ring, uly)
                        comm = b / bw + collectives(m, cfg, ring, uly) * a.latency_us * 1e-6
                        t = compute + comm
                        if best is None or t < best[0]:
                            best = (t, cfg, ring, uly, compute, comm)
                    t, cfg, ring, uly, compute, comm = best
                    print(f"| {mname} {sname} | {dname} | {n} | cfg={cfg},ring={ring},ulysses={uly}"
                          f" | {compute:.2f} | {comm:.2f} | {t:.2f} | {t1 / t:.1f}x | {fits} |")


if __name__ == "__main__":
    main()
