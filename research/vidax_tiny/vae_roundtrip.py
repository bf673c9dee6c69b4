#!/usr/bin/python3
"""Scores the VAE alone with the prompt-adherence analyzer: synthetic clips are encoded and
decoded by a trained vidax-tiny VAE (WORK/vae.pt) and each round trip is scored against its own
caption by `score_clip` (built by score.sh). What a perfect DiT could reach through this VAE.

    research/vidax_tiny/vae_roundtrip.py --vae WORK/vae.pt --vidax build/release/vidax \
        --score-clip build/vidax-tiny-score/score_clip [--count 24] [--seed 3000000] \
        [--layout random|canonical|large]

The clips come from `vidax synth` with seeds from --seed (3,000,000 up: neither training's
1,000,000+ nor the eval suite's 7,000,000+).
"""
import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_scoring import ATTRS, score_video, synth_clips, tally_text  # noqa: E402
from common import CONFIG  # noqa: E402
from models import WanVAE  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vae", required=True)
    ap.add_argument("--vidax", default="build/release/vidax")
    ap.add_argument("--score-clip", required=True)
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--seed", type=int, default=3000000)
    ap.add_argument("--layout", default="random", help="vidax synth --layout of the clips")
    args = ap.parse_args()
    torch.set_num_threads(1)
    vae = WanVAE(**CONFIG["vae"])
    vae.load_state_dict(torch.load(args.vae)["model"])
    vae.eval()
    totals = dict.fromkeys(ATTRS, 0)
    with tempfile.TemporaryDirectory() as tmp:
        ds = synth_clips(args.vidax, os.path.join(tmp, "clips"), args.count, args.seed, args.layout)
        for i in range(len(ds)):
            x = torch.from_numpy(ds.video(i)).unsqueeze(0)  # [1, 3, F, H, W]
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                rec = vae.decode(vae.encode_mu(x)).float().clamp(-1, 1)
            verdict, line = score_video(args.score_clip, rec, ds.caption(i), os.path.join(tmp, "clip.rgb"))
            for a in ATTRS:
                totals[a] += verdict[a]
            print(f"{ds.caption(i)}\n  {line}", flush=True)
    print("round trip of", len(ds), "clips:", tally_text(totals, len(ds)))


if __name__ == "__main__":
    main()
