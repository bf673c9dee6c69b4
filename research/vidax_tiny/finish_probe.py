#!/usr/bin/python3
"""How well does an exported vidax-tiny model *finish* a clip whose layout is given? Held-out
synthetic clips are encoded by the model's own VAE, noised to sigma S (x_S = (1 - S) z + S n),
denoised by Euler with classifier-free guidance from S to 0, decoded and scored against their own
captions by `score_clip` (built by score.sh), as `vidax eval` scores generations from pure noise.

    OMP_NUM_THREADS=1 research/vidax_tiny/finish_probe.py --model models/vidax-tiny \
        --score-clip build/vidax-tiny-score/score_clip [--sigmas 0.9,0.75] [--count 16] \
        [--layout random|canonical|large] [--ask-shape circle|square|triangle]

S = 1 is generation from noise; the smaller S, the more of the clip (place, then size, then
shape) is already fixed by x_S. The sigma at which adherence collapses says which part of the
denoising a DiT has not learnt, and moves long before the eval suite's number does. Clips come
from `vidax synth` with seeds from --seed (3,000,000 up, as vae_roundtrip.py: neither
training's 1,000,000+ nor the eval suite's 7,000,000+); noise n for clip i is seeded by i.
"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_scoring import ATTRS, score_video, synth_clips, tally_text  # noqa: E402
from common import SHAPES, encode_texts, tokenize  # noqa: E402
from exported import load_exported  # noqa: E402
from models import WAN21_MEAN, WAN21_STD, rope_table  # noqa: E402



@torch.no_grad()
def finish(dit, z, s0, ctx, ctx_null, steps, guide, gen):
    """z [1, 16, F, H, W] normalised latent -> the latent denoised from sigma s0 (Euler, CFG)."""
    xt = (1 - s0) * z + s0 * torch.randn(z.shape, generator=gen)
    c, bias = dit.compact_context([ctx, ctx_null])
    cos, sin = rope_table(z.shape[2], z.shape[3] // 2, z.shape[4] // 2, dit.blocks[0].self_attn.head_dim)
    rope = (cos.float(), sin.float())
    sig = np.linspace(s0, 0.0, steps + 1)
    for a, b in zip(sig[:-1], sig[1:]):
        v = dit(xt.expand(2, -1, -1, -1, -1), torch.full((2,), a * 1000.0), c, rope, bias)
        xt = xt + (b - a) * (v[1] + guide * (v[0] - v[1])).unsqueeze(0)
    return xt


def ask_shape(caption, shape):
    """The caption with every shape word replaced by `shape` (--ask-shape)."""
    return re.sub(r"\b(" + "|".join(SHAPES) + r")\b", shape, caption)


def encode_caption(t5, spm, text):
    """-> [L, text_dim], the umT5 output of the caption's tokens (no padding)."""
    return encode_texts(t5, tokenize(spm, [text]))[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/vidax-tiny")
    ap.add_argument("--vidax", default="build/release/vidax")
    ap.add_argument("--score-clip", required=True)
    ap.add_argument("--sigmas", default="0.9,0.75", help="comma-separated start sigmas in (0, 1]")
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--seed", type=int, default=3000000)
    ap.add_argument("--layout", default="random",
                    help="vidax synth --layout of the clips (the one the DiT was trained on)")
    ap.add_argument("--steps", type=int, default=14, help="Euler steps from each start sigma to 0")
    ap.add_argument("--guide", type=float, default=5.0, help="CFG scale (vidax-tiny's default)")
    ap.add_argument("--ask-shape", choices=SHAPES,
                    help="condition on (and score against) each caption with every shape word replaced "
                         "by this one: does the DiT read the shape word? (compare the found shapes "
                         "of runs with each word)")
    args = ap.parse_args()
    sigmas = [float(s) for s in args.sigmas.split(",")]
    if not all(0 < s <= 1 for s in sigmas):
        sys.exit(f"--sigmas: expected values in (0, 1], got '{args.sigmas}'")
    torch.set_num_threads(1)
    t5, dit, vae = load_exported(args.model)
    mean = torch.tensor(WAN21_MEAN).view(1, -1, 1, 1, 1)
    std = torch.tensor(WAN21_STD).view(1, -1, 1, 1, 1)
    spm = os.path.join(args.model, "google", "umt5-xxl", "spiece.model")
    ctx_null = encode_caption(t5, spm, "")  # the unconditional branch vidax-tiny was trained with
    with tempfile.TemporaryDirectory() as tmp:
        ds = synth_clips(args.vidax, os.path.join(tmp, "clips"), args.count, args.seed, args.layout)
        totals = {s0: dict.fromkeys(ATTRS, 0) for s0 in sigmas}
        # Clip by clip, so each clip is encoded once for all the start sigmas; the noise of clip
        # i is seeded by i at every sigma, so a row does not depend on which others were asked.
        for i in range(len(ds)):
            with torch.no_grad():
                # The exported VAE's raw latent carries the official statistics (vidax's
                # normalisation maps it to what the DiT was trained on).
                z = (vae.encode_mu(torch.from_numpy(ds.video(i)).unsqueeze(0)) - mean) / std
            caption = ds.caption(i)
            if args.ask_shape:
                caption = ask_shape(caption, args.ask_shape)
            ctx = encode_caption(t5, spm, caption)
            for s0 in sigmas:
                out = finish(dit, z, s0, ctx, ctx_null, args.steps, args.guide,
                             torch.Generator().manual_seed(i))
                with torch.no_grad():
                    rec = vae.decode(out * std + mean).clamp(-1, 1)
                verdict, line = score_video(args.score_clip, rec, caption, os.path.join(tmp, "clip.rgb"))
                for a in ATTRS:
                    totals[s0][a] += verdict[a]
                print(f"sigma {s0} | {caption}\n  {line}", flush=True)
        for s0 in sigmas:
            print(f"finished from sigma {s0}, {len(ds)} clips:", tally_text(totals[s0], len(ds)), flush=True)


if __name__ == "__main__":
    main()
