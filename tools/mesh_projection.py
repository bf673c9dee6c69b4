#!/usr/bin/env python3
"""Projected seconds per guided denoising step of Wan 2.1 on N devices under vidax's meshes.

A projection, not a measurement: compute time is the forward's FLOPs (the formula of
WanDit::forward_flops) at a stated fraction of a device's published bf16 peak, split evenly
over the sequence ranks; communication time is the bytes vidax's mesh sends per rank (the formula
of wan::dit_comm_bytes, src/models/wan/dit_comm_model.cpp, which `vidax bench dit --mesh` checks
against the bytes the process groups counted) over a published per-device link bandwidth, plus a
per-collective latency (`vidax bench comm` measures both on the machine at hand). Nothing
overlaps communication with compute (vidax does not yet), so this is an upper bound for the mesh.
Tensor parallelism divides the blocks' weights (about 98% of them) over the tp ranks; a mesh
counts only if one rank's weights (x 1.3 for activations and scratch) fit the device.

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


def comm_bytes(m, L, cfg, ring, uly, tp=1, act=2):
    """Bytes one rank sends per guided step (both branches; one forward per rank under cfg=2)."""
    sp = ring * uly
    lr = math.ceil(L / sp)
    d, layers = m["dim"] / tp, m["layers"]  # a tp rank exchanges only its heads
    per_forward = 0.0
    if tp > 1:  # all-reduce (f32) of o, cross-o, FFN-out and of the q, k, cross-q norm statistics
        def all_reduce(floats):
            return 2 * floats * 4 * (tp - 1) // tp
        per_forward += layers * (3 * all_reduce(lr * m["dim"]) + 3 * all_reduce(lr))
    if uly > 1:
        per_forward += layers * 4 * lr * d * (uly - 1) / uly * act
    if ring > 1:
        per_forward += layers * 2 * lr * d * (ring - 1) * act
    if sp > 1:
        per_forward += lr * m["out"] * 4 * (sp - 1)
    forwards = 1 if cfg == 2 else 2
    prediction_bytes = 16 * 4 * L * 4  # [16, F, H, W] f32: 4 latent pixels per token
    return per_forward * forwards + (prediction_bytes if cfg == 2 else 0), forwards


def collectives(m, cfg, ring, uly, tp=1):
    per_forward = m["layers"] * (2 * (uly > 1) + (ring - 1) + 6 * (tp > 1)) + (ring * uly > 1)
    return per_forward * (1 if cfg == 2 else 2) + (cfg == 2)


def meshes(n, heads):
    for cfg in (1, 2):
        for tp in range(1, n + 1):
            for uly in range(1, n + 1):
                if n % (cfg * uly * tp) or heads % (uly * tp):
                    continue
                yield cfg, n // (cfg * uly * tp), uly, tp


def rank_weights(m, tp):
    return m["weights"] * (0.02 + 0.98 / tp)  # blocks divided, embeddings and head replicated


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-us", type=float, default=20.0)
    ap.add_argument("--efficiency", type=float, default=0.5, help="fraction of bf16 peak")
    a = ap.parse_args()
    print("| model, shape | devices | N | best mesh that fits | compute s | comm s | step s "
          "| speed-up vs 1 | weights per rank |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mname, m in MODELS.items():
        for sname, (f, h, w) in SHAPES.items():
            L = f * h * w // 4
            step_flops = 2 * forward_flops(m, L)
            for dname, (peak, bw, mem) in DEVICES.items():
                t1 = step_flops / (peak * a.efficiency)
                for n in (8, 16, 64):
                    best = None
                    for cfg, ring, uly, tp in meshes(n, m["heads"]):
                        if rank_weights(m, tp) * 1.3 >= mem:
                            continue  # this rank's weights do not fit the device
                        compute = t1 / n
                        b, _ = comm_bytes(m, L, cfg, ring, uly, tp)
                        comm = b / bw + collectives(m, cfg, ring, uly, tp) * a.latency_us * 1e-6
                        t = compute + comm
                        if best is None or t < best[0]:
                            best = (t, cfg, ring, uly, tp, compute, comm)
                    if best is None:
                        print(f"| {mname} {sname} | {dname} | {n} | none fits | | | | | |")
                        continue
                    t, cfg, ring, uly, tp, compute, comm = best
                    print(f"| {mname} {sname} | {dname} | {n} | cfg={cfg},ring={ring},ulysses={uly},"
                          f"tp={tp} | {compute:.2f} | {comm:.2f} | {t:.2f} | {t1 / t:.1f}x "
                          f"| {rank_weights(m, tp):.1f} GiB |")


if __name__ == "__main__":
    main()
