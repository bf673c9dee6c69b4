#!/usr/bin/python3
"""Writes tests/data/vidax_tiny_parity.safetensors: the training code's own fp32 forward passes
on the exported vidax-tiny files, for tests/models/vidax_tiny_parity_test.cpp to compare with
vidax (same inputs, fixture tolerances).

    OMP_NUM_THREADS=1 /usr/bin/python3 research/vidax_tiny/parity.py [--model models/vidax-tiny]

Tensors (names as in the fixtures, so `vidax run dit` / `vidax run vae-decode` take the file):
  DiT  x [16, 3, 16, 16], t [1], context [L, 64] (unpadded T5 rows), seq_len I64 [1] -> out
  VAE  z [1, 16, 3, 8, 8] normalised latent, scale_mean [16], scale_inv_std [16] (the official
       Wan 2.1 statistics vidax applies) -> dec_out [1, 3, 9, 64, 64] (raw, unclamped)
  T5   ids I64 [1, 40] (a caption + </s>, padded with 0), mask I64 [1, 40] -> t5_out [1, 40, 64]
The models are rebuilt from the exported files only (weights as stored, computed in f32).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CONFIG, tokenize, write_safetensors  # noqa: E402
from exported import load_exported  # noqa: E402
from models import WAN21_MEAN, WAN21_STD  # noqa: E402

PROMPT = "a red square moves to the left on a dark blue background"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/vidax-tiny")
    ap.add_argument("--out", default="tests/data/vidax_tiny_parity.safetensors")
    args = ap.parse_args()
    torch.set_num_threads(1)
    m = args.model
    gen = torch.Generator().manual_seed(CONFIG["seed"] + 7)

    t5, dit, vae = load_exported(m)
    (tok,) = tokenize(os.path.join(m, "google", "umt5-xxl", "spiece.model"), [PROMPT])
    ids = torch.zeros(1, 40, dtype=torch.int64)
    ids[0, :len(tok)] = torch.tensor(tok)
    mask = (torch.arange(40) < len(tok)).long().unsqueeze(0)
    with torch.no_grad():
        t5_out = t5(ids, mask)  # [1, 40, 64]
    context = t5_out[0, :len(tok)].clone()

    x = torch.randn((16, 3, 16, 16), generator=gen)
    t = torch.tensor([731.0])
    with torch.no_grad():
        out = dit(x.unsqueeze(0), t, dit.pad_context([context]))[0]  # float64 RoPE, 512 rows

    # VAE decode with the official statistics, as vidax applies them to a Wan2.1_VAE.pth
    z = torch.randn((1, 16, 3, 8, 8), generator=gen)
    mean = torch.tensor(WAN21_MEAN)
    inv_std = 1.0 / torch.tensor(WAN21_STD)
    with torch.no_grad():
        dec = vae.decode(z / inv_std.view(1, -1, 1, 1, 1) + mean.view(1, -1, 1, 1, 1))

    write_safetensors(args.out, {
        "x": x, "t": t, "context": context, "seq_len": torch.tensor([3 * 8 * 8]), "out": out,
        "z": z, "scale_mean": mean, "scale_inv_std": inv_std, "dec_out": dec,
        "ids": ids, "mask": mask, "t5_out": t5_out,
    }, metadata={"source": "research/vidax_tiny/parity.py", "model": "models/vidax-tiny",
                 "prompt": PROMPT})
    print(f"wrote {args.out}: out |max| {out.abs().max():.3f}, dec_out |max| {dec.abs().max():.3f}, "
          f"t5_out |max| {t5_out.abs().max():.3f}")


if __name__ == "__main__":
    main()
