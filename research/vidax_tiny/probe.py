#!/usr/bin/python3
"""Diagnostics for a vidax-tiny WORK directory (docs/vidax-tiny.md, "Experiments, by
question": frame drift, the caption path). One thread; each runs in well under a minute.

    probe.py latents WORK         how much of the clips' global colour the caption's background
                                  explains with and without knowing the latent frame
    probe.py still WORK VAE.pt    static spread of still clips' latents (0: every latent frame
                                  the same) and round-trip PSNR, 4 held-out clips at 256x256x17
    probe.py x0 WORK DIT.pt       the DiT's x0 prediction at sigma 1 / 0.9 / 0.7 on 16 training
                                  latents against the truth and against the dataset mean, and
                                  at sigma 1 how far another clip's caption moves it
    probe.py words WORK DIT.pt    does the DiT read the shape and colour words? 16 one-object
                                  training latents noised to sigma 0.9 / 0.75 / 0.5, the x0
                                  prediction with the caption's shape word (or the object's
                                  colour word) replaced, against the prediction with the caption
                                  (--image: their first latent frames alone)

`--set KEY=VALUE` arguments override CONFIG as in train.py (a DiT trained with
`--set dit.text_len=64` must be probed with the same).

WORK needs latents.pt (x0, latents), clips/ (still) and spiece.model (x0). DIT.pt and VAE.pt may
be results (dit.pt, vae.pt) or checkpoints (*_ckpt.pt); `--raw` probes a checkpoint's trained
weights instead of their moving average (a fork whose average still holds the old run's weights).
"""
import argparse
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402
from common import CONFIG as C, COLOURS, SHAPES, apply_overrides, encode_texts, tokenize  # noqa: E402
from dataset import SynthDataset  # noqa: E402
from models import WanDiT, WanVAE, rope_table  # noqa: E402

BACKGROUND = re.compile(r"(?:on|against) an? (.*?) background")


def probe_latents(work):
    lat = torch.load(os.path.join(work, "latents.pt"))
    z = train.normalised_latents(lat).float()
    g = z.mean(dim=(3, 4))  # [N, C, F]: each latent frame's mean ("global colour")
    bg = [BACKGROUND.search(c).group(1) for c in lat["captions"]]
    aware = agnostic = 0.0
    for name in sorted(set(bg)):
        gb = g[[i for i, b in enumerate(bg) if b == name]]
        aware += float(((gb - gb.mean(0, keepdim=True)) ** 2).sum())
        agnostic += float(((gb - gb.mean(dim=(0, 2), keepdim=True)) ** 2).sum())
    total = float(((g - g.mean(0)) ** 2).mean())
    print(f"global colour variance {total:.3f}; left by the background word, per latent frame "
          f"{aware / g.numel():.3f}, one value for all frames {agnostic / g.numel():.3f}")
    print("std of each latent frame", z.std(dim=(0, 1, 3, 4)).numpy().round(3))


def probe_still(work, vae_file):
    vae = WanVAE(**C["vae"])
    state = torch.load(vae_file)
    vae.load_state_dict(state.get("model", state))
    vae.eval()
    ds = SynthDataset(os.path.join(work, "clips"))
    spread, p_moving, p_still = [], [], []
    first = C["clips"]  # the held-out clips
    for i in range(first, first + C["holdout"]):
        clip = ds.clip(i)
        still = np.repeat(clip[ds.frames // 2:ds.frames // 2 + 1], ds.frames, axis=0)
        for c, psnrs in ((clip, p_moving), (still, p_still)):
            x = (torch.from_numpy(np.array(c)).permute(3, 0, 1, 2).float()[None] - 127.5) / 127.5  # a copy: clips are read-only
            with torch.no_grad():
                mu = vae.encode_mu(x)
                psnrs.append(train.psnr(vae.decode(mu), x))
            if c is still:
                spread.append(float(train.static_spread(mu)))
    print(f"static spread {np.mean(spread):.3f}; PSNR moving {np.mean(p_moving):.2f} dB, "
          f"still {np.mean(p_still):.2f} dB")


def load_dit(dit_file, raw):
    dit = WanDiT(**C["dit"])
    state = torch.load(dit_file)
    # A trainer checkpoint of a run with dit_ema: its averaged weights, as dit.pt would hold,
    # unless --raw asks for the trained ones (a checkpoint's "model", dit.pt's "model_raw").
    if state.get("ema") is not None:  # a checkpoint of a run with an average
        weights, kind = (state["model"], "trained") if raw else (state["ema"], "EMA")
    elif "model_raw" in state:  # dit.pt of such a run: "model" is the average
        weights, kind = (state["model_raw"], "trained") if raw else (state["model"], "EMA")
    else:
        weights, kind = state.get("model", state), "trained"
    dit.load_state_dict(weights)
    if "step" in state:
        print(f"{kind} weights of the DiT at step {state['step']}")
    return dit.eval()


def probe_x0(work, dit_file, raw):
    lat = torch.load(os.path.join(work, "latents.pt"))
    z = train.normalised_latents(lat).float()
    dit = load_dit(dit_file, raw)
    n = 16
    x0 = z[:n]
    ids = tokenize(os.path.join(work, "spiece.model"), lat["captions"][:n])
    ctx, bias = dit.compact_context(encode_texts(train.load_t5(work), ids))
    cos, sin = rope_table(x0.shape[2], x0.shape[3] // 2, x0.shape[4] // 2,
                          dit.blocks[0].self_attn.head_dim)
    mean = z.mean(0, keepdim=True)
    gen = torch.Generator().manual_seed(1)
    for s in (1.0, 0.9, 0.7):
        noise = torch.randn(x0.shape, generator=gen)
        xt = (1 - s) * x0 + s * noise
        with torch.no_grad():
            v = dit(xt, torch.full((n,), s * 1000.0), ctx, (cos.float(), sin.float()), bias).float()
        pred = xt - s * v
        pg, tg = pred.mean(dim=(3, 4)), x0.mean(dim=(3, 4))
        print(f"sigma {s}: mse {float(((pred - x0) ** 2).mean()):.3f} (dataset mean "
              f"{float(((mean - x0) ** 2).mean()):.3f}); global colour mse "
              f"{float(((pg - tg) ** 2).mean()):.3f} (dataset mean "
              f"{float(((mean.mean(dim=(3, 4)) - tg) ** 2).mean()):.3f})")
        if s == 1.0:
            # The same noise with each clip given the next clip's caption: how far the global
            # colour moves, against how far the two clips' true global colours are apart
            # (0: the caption is ignored; 1: it moves as far as the truth does).
            with torch.no_grad():
                v2 = dit(xt, torch.full((n,), s * 1000.0), ctx.roll(1, 0), (cos.float(), sin.float()),
                         bias.roll(1, 0)).float()
            pg2 = (xt - s * v2).mean(dim=(3, 4))
            print(f"sigma 1 caption effect {float(((pg - pg2) ** 2).mean()):.3f} (true "
                  f"difference {float(((tg - tg.roll(1, 0)) ** 2).mean()):.3f})")


OBJECT = re.compile(r"\ban? (" + "|".join(COLOURS) + r") (" + "|".join(SHAPES) + r")\b")


def swap_object(caption, what):
    """The one-object caption with its object's shape (or colour) word replaced by the next one."""
    m = OBJECT.search(caption)
    colour, shape = m.group(1), m.group(2)
    if what == "shape":
        shape = SHAPES[(SHAPES.index(shape) + 1) % len(SHAPES)]
    else:
        colour = COLOURS[(COLOURS.index(colour) + 1) % len(COLOURS)]
    article = "an" if colour[0] in "aeiou" else "a"
    return caption[:m.start()] + f"{article} {colour} {shape}" + caption[m.end():]


def probe_words(work, dit_file, raw, image):
    """How far a changed shape or colour word moves the x0 prediction (mean square over all
    voxels). Nothing here says how far it should move: compare the two words, and runs
    (docs/vidax-tiny.md measured the ratio for a known object place once: 0.46)."""
    lat = torch.load(os.path.join(work, "latents.pt"))
    z = train.normalised_latents(lat).float()
    dit = load_dit(dit_file, raw)
    # One-object clips only, so "the object's shape" is one word and one place.
    pick = [i for i, c in enumerate(lat["captions"]) if len(OBJECT.findall(c)) == 1][:16]
    n = len(pick)
    x0 = z[pick][:, :, :1] if image else z[pick]  # image: the first latent frames alone
    captions = [lat["captions"][i] for i in pick]
    texts = captions + [swap_object(c, "shape") for c in captions] + [swap_object(c, "colour") for c in captions]
    ctx, bias = dit.compact_context(encode_texts(train.load_t5(work), tokenize(os.path.join(work, "spiece.model"), texts)))
    cos, sin = rope_table(x0.shape[2], x0.shape[3] // 2, x0.shape[4] // 2, dit.blocks[0].self_attn.head_dim)
    gen = torch.Generator().manual_seed(1)
    print(f"{n} one-object {'images' if image else 'clips'}, e.g. '{texts[0]}' -> '{texts[n]}' / '{texts[2 * n]}'")
    for s in (0.9, 0.75, 0.5):
        xt = (1 - s) * x0 + s * torch.randn(x0.shape, generator=gen)
        preds = []
        for k in range(3):  # true caption, shape swapped, colour swapped
            with torch.no_grad():
                v = dit(xt, torch.full((n,), s * 1000.0), ctx[k * n:(k + 1) * n],
                        (cos.float(), sin.float()), bias[k * n:(k + 1) * n]).float()
            preds.append(xt - s * v)
        d_shape = float(((preds[1] - preds[0]) ** 2).mean())
        d_colour = float(((preds[2] - preds[0]) ** 2).mean())
        err = float(((preds[0] - x0) ** 2).mean())
        print(f"sigma {s}: x0 mse {err:.4f}; moved by the shape word {d_shape:.5f}, by the colour "
              f"word {d_colour:.5f} (ratio {d_shape / max(d_colour, 1e-12):.3f})")


def main():
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("latents", "still", "x0", "words"))
    ap.add_argument("work")
    ap.add_argument("file", nargs="?", help="VAE.pt (still) or DIT.pt (x0, words)")
    ap.add_argument("--raw", action="store_true", help="a checkpoint's trained weights, not their average")
    ap.add_argument("--image", action="store_true", help="words: the clips' first latent frames alone "
                    "(what dit_image_every trains on)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    if (args.file is None) != (args.what == "latents"):
        ap.error(f"{args.what} takes {'no' if args.what == 'latents' else 'a'} file argument")
    apply_overrides(args.set)
    if args.what == "latents":
        probe_latents(args.work)
    elif args.what == "still":
        probe_still(args.work, args.file)
    elif args.what == "x0":
        probe_x0(args.work, args.file, args.raw)
    else:
        probe_words(args.work, args.file, args.raw, args.image)


if __name__ == "__main__":
    main()
