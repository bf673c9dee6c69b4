#!/usr/bin/python3
"""Trains the vidax-tiny family on the synthetic world and exports it in the official Wan 2.1
layout (docs/vidax-tiny.md).

    /usr/bin/python3 research/vidax_tiny/train.py all --work WORK --out models/vidax-tiny

Phases (each resumable; `all` runs the missing ones in order, a phase whose result exists is
skipped, an interrupted training phase continues from its last checkpoint):
  tokenizer  caption-only dataset -> spm_train unigram -> WORK/spiece.model
  data       `vidax synth` clips (256x256x17) -> WORK/clips
  vae        Wan 2.1 VAE trained as a deterministic autoencoder on random crops -> WORK/vae.pt
  vae_tune   (vae_tune_steps > 0) fine-tuned so still content keeps one latent -> WORK/vae_tuned.pt
  latents    every clip encoded once; per-channel statistics -> WORK/latents.pt
  t5         (t5_pretrain_steps > 0) umT5 encoder taught to parse captions -> WORK/t5.pt
  dit        Wan 2.1 T2V DiT, flow matching on the normalised latents -> WORK/dit.pt
  export     official files -> OUT

Every random draw is seeded from CONFIG (common.py); the training steps draw their batch, noise
and sigmas from a generator seeded by (seed, step), so a resumed run is the same run.
`--procs N` runs the dit phase as N data-parallel processes of one thread each (~2.1x the steps
per second with 2 on this 2-core machine; the same run up to float order, data_parallel.py).
"""
import argparse
import contextlib
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_parallel  # noqa: E402
from common import (CONFIG, apply_overrides, encode_texts, encode_texts_train, make_t5, tokenize,  # noqa: E402
                    write_safetensors)
from dataset import SynthDataset, to_model  # noqa: E402
from models import GELU_FORMS, WanDiT, WanVAE, fold_latent_stats, gelu_form, init_vae_for_training, rope_table  # noqa: E402

C = CONFIG
CKPT_SECONDS = 120  # checkpoint cadence (does not change the result)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def save_atomic(obj, path):
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def vocab_size(work):
    with open(os.path.join(work, "spiece.vocab")) as f:
        return sum(1 for _ in f)


# ----------------------------------------------------------------------------------------------


def phase_tokenizer(args):
    w = args.work
    if os.path.exists(os.path.join(w, "spiece.model")):
        return
    if C["tokenizer_type"] not in ("unigram", "word"):
        sys.exit(f"tokenizer_type: expected unigram or word, got '{C['tokenizer_type']}'")
    cap_dir = os.path.join(w, "captions")
    if not os.path.exists(os.path.join(cap_dir, "manifest.json")):
        subprocess.run([args.vidax, "synth", "--out", cap_dir, "--count", str(C["caption_clips"]),
                        "--seed", str(C["data_seed"]), "--size", "16x16", "--frames", "1",
                        "--shard-size", "100000"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(cap_dir, "manifest.json")) as f:
        caps = [c["caption"] for c in json.load(f)["clips"]]
    txt = os.path.join(w, "captions.txt")
    with open(txt, "w") as f:
        f.write("\n".join(caps) + "\n")
    # Relative paths, run inside WORK: spm_train records --input and --model_prefix in the
    # model, so absolute ones would make the file depend on where WORK is.
    subprocess.run(["spm_train", "--input=captions.txt", "--model_prefix=spiece",
                    f"--vocab_size={C['vocab']}", f"--model_type={C['tokenizer_type']}", "--character_coverage=1.0",
                    "--pad_id=0", "--eos_id=1", "--unk_id=2", "--bos_id=-1",
                    "--hard_vocab_limit=false", "--num_threads=1", "--minloglevel=2"],
                   check=True, cwd=w, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log("tokenizer:", vocab_size(w), "pieces from", len(caps), "captions")


def phase_data(args):
    d = os.path.join(args.work, "clips")
    if os.path.exists(os.path.join(d, "manifest.json")):
        return
    t0 = time.time()
    write_clips(args, d, C["clips"] + C["holdout"])
    log(f"data: {C['clips']} + {C['holdout']} held-out clips in {time.time() - t0:.0f} s")


def write_clips(args, out, count, *extra):
    """`vidax synth` clips data_seed .. data_seed + count - 1 at the training size into `out`."""
    subprocess.run([args.vidax, "--threads", str(C["threads"]), "synth", "--out", out,
                    "--count", str(count), "--seed", str(C["data_seed"]),
                    "--size", f"{C['size']}x{C['size']}", "--frames", str(C["frames"]),
                    "--shard-size", "64", "--preview", "8", *extra],
                   check=True, stdout=subprocess.DEVNULL)


def dit_clip_dir(args):
    """The DiT's clips: the VAE's own ("clips") or a copy of their seeds drawn with another
    `vidax synth --layout` (canonical or large: same captions, other geometry)."""
    layout = C["dit_layout"]
    if layout == "random":
        return os.path.join(args.work, "clips")
    if layout not in ("canonical", "large"):
        sys.exit(f"dit_layout: expected random, canonical or large, got '{layout}'")
    d = os.path.join(args.work, "dit_clips")
    manifest = os.path.join(d, "manifest.json")
    if not os.path.exists(manifest):
        write_clips(args, d, min(C["clips"], C["dit_clips"]), "--layout", layout)
        log(f"data: {layout}-layout clips for the DiT in", d)
    with open(manifest) as f:
        have = json.load(f).get("layout", "random")
    if have != layout:
        sys.exit(f"dit_layout is {layout} but {d} holds {have}-layout clips: remove it to redraw")
    return d


def dit_autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(C["dit_bf16"]))


@contextlib.contextmanager
def dit_training_forward(dit):
    """The DiT's training forward: bf16 autocast (dit_bf16) and the GELU form dit_train_gelu."""
    if C["dit_train_gelu"] not in GELU_FORMS:
        sys.exit(f"dit: dit_train_gelu {C['dit_train_gelu']!r}: tanh (Wan's) or erf")
    with dit_autocast(), gelu_form(dit, C["dit_train_gelu"]):
        yield


# ----------------------------------------------------------------------------------------------


def lr_at(step, total, base, warmup, cosine=True):
    if step < warmup:
        return base * (step + 1) / warmup
    if not cosine:
        return base
    p = (step - warmup) / max(1, total - warmup)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


class Trainer:
    """Checkpointed loop: state = model, optimiser, step, loss log, seconds trained, and with
    ema > 0 an exponential moving average of the weights (decay min(ema, (1 + k) / (10 + k))
    at step k, the usual warm-up so early averages are not dominated by the initialisation)."""

    def __init__(self, name, work, model, lr, ema=0.0, group=None):
        self.name, self.model, self.ema_decay = name, model, ema
        self.group = group or data_parallel.Group()  # rank 0 alone writes and logs
        self.ckpt = os.path.join(work, f"{name}_ckpt.pt")
        self.csv = os.path.join(work, f"{name}_loss.csv")
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        self.step, self.losses, self.seconds = 0, [], 0.0
        self.ema = None
        if os.path.exists(self.ckpt):
            s = torch.load(self.ckpt)
            model.load_state_dict(s["model"])
            self.opt.load_state_dict(s["opt"])
            self.step, self.losses, self.seconds = s["step"], s["losses"], s["seconds"]
            self.ema = s.get("ema")
            if ema and self.ema is None:
                sys.exit(f"{name}: {self.ckpt} has no EMA weights; it was not started with EMA on")
            if self.group.main:
                log(f"{name}: resumed at step {self.step}")
        if ema and self.ema is None:
            self.ema = {k: v.detach().clone().float() for k, v in model.state_dict().items()}

    def update_ema(self):
        d = min(self.ema_decay, (1 + self.step) / (10 + self.step))
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                if v.is_floating_point():
                    self.ema[k].mul_(d).add_(v.float(), alpha=1 - d)
                else:
                    self.ema[k].copy_(v)

    def save(self):
        state = {"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                 "step": self.step, "losses": self.losses, "seconds": self.seconds}
        if self.ema is not None:
            state["ema"] = self.ema
        save_atomic(state, self.ckpt)
        with open(self.csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["step", "loss", "seconds"])
            wr.writerows(self.losses)

    def run(self, total, lr_fn, step_fn, clip=1.0, every=None):
        """lr_fn(step) -> rate; step_fn(gen, step) -> loss; every = (n, fn): fn(step) after
        every n-th step (a side computation that must not touch the training state)."""
        last_save = time.time()
        while self.step < total:
            t0 = time.time()
            for g in self.opt.param_groups:
                g["lr"] = lr_fn(self.step)
            gen = torch.Generator().manual_seed(C["seed"] * 1000003 + self.step)
            loss = step_fn(gen, self.step)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            loss = self.group.sum_grads(self.model.parameters(), loss)  # the whole batch's
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
            self.opt.step()
            if self.ema is not None:
                self.update_ema()
            self.seconds += time.time() - t0
            self.step += 1
            self.losses.append([self.step, float(loss), round(self.seconds, 1)])
            if not self.group.main:
                continue
            if self.step % 10 == 0:
                recent = np.mean([l[1] for l in self.losses[-10:]])
                log(f"{self.name} step {self.step}/{total} loss {recent:.4f} ({self.seconds:.0f} s)")
            scored = every and (self.step % every[0] == 0 or self.step == total)
            if time.time() - last_save > CKPT_SECONDS or self.step == total or scored:
                self.save()  # a scored step is also saved, so that its weights can be studied again
                last_save = time.time()
            if scored:
                every[1](self.step)


def psnr(a, b):
    """PSNR in dB of two [-1, 1] videos, on the 0..255 scale after clamping."""
    mse = F.mse_loss(a.clamp(-1, 1), b.clamp(-1, 1)).item() * (127.5 ** 2)
    return 10 * math.log10(255 ** 2 / max(mse, 1e-10))


@torch.no_grad()
def vae_gate(vae, ds, first, count):
    """Mean PSNR of encode -> decode over held-out clips at full size (256x256x17), of frames
    9..16 alone (the second and later chunks of the causal path) and of the object pixels alone
    (`object_mask`; what prompts are about, a few percent of the frame)."""
    was = vae.training
    vae.eval()
    full, late, obj = [], [], []
    for i in range(first, first + count):
        x = torch.from_numpy(ds.video(i)).unsqueeze(0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            rec = vae.decode(vae.encode_mu(x)).float()
        full.append(psnr(rec, x))
        late.append(psnr(rec[:, :, 9:], x[:, :, 9:]))
        m = torch.from_numpy(object_mask(ds.clip(i)))  # [F, H, W]
        obj.append(psnr(rec[0].permute(1, 2, 3, 0)[m], x[0].permute(1, 2, 3, 0)[m]))
    vae.train(was)
    return float(np.mean(full)), float(np.mean(late)), float(np.mean(obj))


def object_mask(clip):
    """uint8 [F, H, W, 3] -> bool [F, H, W]: pixels whose colour differs from the background by
    more than 60 (sum of |RGB| differences). The background is the top-left pixel of the first
    frame (scenes keep every object 30 permille inside the frame; docs/synthetic-world.md);
    objects differ from every background by ~145 and anti-aliased edges count from ~40%."""
    bg = clip[0, 0, 0].astype(np.int16)
    return np.abs(clip.astype(np.int16) - bg).sum(-1) > 60


def latent_footprint(mask, temporal=4, spatial=8):
    """bool [F, H, W] pixel mask -> bool [1 + (F-1)/temporal, H/spatial, W/spatial]: the latent
    voxels whose pixels (the VAE's causal chunks: frame 0 alone, then groups of `temporal`
    frames; `spatial` x `spatial` squares) contain any object pixel."""
    f, h, w = mask.shape
    chunks = [mask[0:1]] + [mask[1 + temporal * k:1 + temporal * (k + 1)]
                            for k in range((f - 1) // temporal)]
    lat = np.stack([c.any(0) for c in chunks])
    return lat.reshape(len(chunks), h // spatial, spatial, w // spatial, spatial).any((2, 4))


def footprint_edge(foot):
    """[N, F, H, W] 0/1 latent footprints -> 0/1, the voxels within one of an outline (in a
    3x3 dilation of the footprint but not in its 3x3 erosion), frame by frame."""
    n, f, h, w = foot.shape
    x = foot.reshape(n * f, 1, h, w)
    dilated = F.max_pool2d(x, 3, stride=1, padding=1)
    eroded = 1 - F.max_pool2d(1 - x, 3, stride=1, padding=1)
    return (dilated - eroded).reshape(n, f, h, w)


def crop_origin(gen, obj0, crop, height, width):
    """Top-left corner of a crop: with probability vae_centre_crops one that contains a random
    object pixel of the first frame (at a random position inside the crop), else uniform."""
    if float(torch.rand(1, generator=gen)) < C["vae_centre_crops"] and obj0.any():
        ys, xs = np.nonzero(obj0)
        j = int(torch.randint(len(ys), (1,), generator=gen))
        y0 = int(ys[j]) - int(torch.randint(crop, (1,), generator=gen))
        x0 = int(xs[j]) - int(torch.randint(crop, (1,), generator=gen))
        return min(max(y0, 0), height - crop), min(max(x0, 0), width - crop)
    y0 = int(torch.randint(height - crop + 1, (1,), generator=gen))
    x0 = int(torch.randint(width - crop + 1, (1,), generator=gen))
    return y0, x0


def vae_recon_loss(rec, x, w, mu):
    """The VAE's training loss: per-pixel weights w (objects count more), L1 + L2 of the
    reconstruction error (L1 keeps edges sharp, L2 the flat areas), and a tiny latent penalty
    that only bounds the latent scale."""
    e = rec.float() - x
    return (w * (e.abs() + e * e)).mean() / w.mean() + 1e-4 * mu.float().pow(2).mean()


def normalised_latents(lat):
    """latents.pt -> z [N, 16, F, H, W] with zero mean / unit variance per channel (the DiT's x0)."""
    return (lat["mu"] - lat["mean"].view(1, -1, 1, 1, 1)) / lat["std"].view(1, -1, 1, 1, 1)


def phase_vae(args):
    out = os.path.join(args.work, "vae.pt")
    if os.path.exists(out):
        return
    torch.manual_seed(C["seed"] + 2)
    vae = WanVAE(**C["vae"])
    init_vae_for_training(vae)
    ds = SynthDataset(os.path.join(args.work, "clips"))
    n_train = C["clips"]  # clips n_train.. are held out for the PSNR gate
    small, big = C["vae_steps"], C["vae_steps"] + C["vae_big_steps"]
    total = big + C["vae_long_steps"]

    def step(gen, k):
        crop, bsz = (C["vae_crop"], C["vae_batch"]) if k < small else (C["vae_big_crop"], C["vae_big_batch"])
        nf = C["vae_warm_frames"] if k < C["vae_warm_steps"] else C["vae_crop_frames"]
        if k >= big:
            crop, bsz, nf = C["vae_long_crop"], C["vae_long_batch"], C["vae_long_frames"]
        xs, ws = [], []
        for _ in range(bsz):
            i = int(torch.randint(n_train, (1,), generator=gen))
            t0 = int(torch.randint(ds.frames - nf + 1, (1,), generator=gen))
            clip = ds.clip(i)[t0:t0 + nf]  # [nf, H, W, 3] u8
            obj = object_mask(clip)  # [nf, H, W] bool
            y0, x0 = crop_origin(gen, obj[0], crop, ds.height, ds.width)
            xs.append(torch.from_numpy(np.ascontiguousarray(clip[:, y0:y0 + crop, x0:x0 + crop])).permute(3, 0, 1, 2))
            ws.append(torch.from_numpy(np.ascontiguousarray(obj[:, y0:y0 + crop, x0:x0 + crop])))
        x = (torch.stack(xs).float() - 127.5) / 127.5  # [b, 3, nf, crop, crop]
        # Objects cover a few percent of the pixels and are what prompts are about: their pixels
        # weigh 1 + vae_obj_weight (normalised so a crop without objects keeps weight 1).
        w = 1.0 + C["vae_obj_weight"] * torch.stack(ws).float().unsqueeze(1)  # [b, 1, nf, crop, crop]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mu = vae.encode_mu(x)
            rec = vae.decode(mu)
        return vae_recon_loss(rec, x, w, mu)

    def lr(k):
        # Warm-up, constant through the small-crop stage (a longer stage extends a shorter one
        # exactly), then cosine to 10% over the large-crop stage.
        if k < small:
            return lr_at(k, small, C["vae_lr"], 20, cosine=False)
        if k < big:
            return lr_at(k - small, C["vae_big_steps"], C["vae_lr"], 0)
        return lr_at(k - big, C["vae_long_steps"], C["vae_long_lr"], 0)

    gate_csv = os.path.join(args.work, "vae_psnr.csv")

    def gate(k):
        n_hold = min(C["holdout"], len(ds) - n_train)
        if n_hold <= 0:
            return
        p, p_late, p_obj = vae_gate(vae, ds, n_train, n_hold)
        log(f"vae gate step {k}: PSNR {p:.2f} dB on {n_hold} held-out clips (frames 9..16: "
            f"{p_late:.2f} dB, object pixels: {p_obj:.2f} dB)")
        new = not os.path.exists(gate_csv)
        with open(gate_csv, "a") as f:
            if new:
                f.write("step,psnr_db,psnr_late_db,psnr_object_db\n")
            f.write(f"{k},{p:.3f},{p_late:.3f},{p_obj:.3f}\n")

    tr = Trainer("vae", args.work, vae, C["vae_lr"])
    tr.run(total, lr, step, clip=C["vae_clip"], every=(C["vae_gate_every"], gate))
    save_atomic({"model": vae.state_dict(), "seconds": tr.seconds}, out)
    log(f"vae: done in {tr.seconds:.0f} s")


def vae_path(work):
    """The VAE the later phases encode with: the fine-tuned one when vae_tune_steps > 0."""
    return os.path.join(work, "vae_tuned.pt" if C["vae_tune_steps"] else "vae.pt")


def encoding_vae(work):
    """The VAE the later phases encode (and stills.py decodes) with, in eval mode."""
    vae = WanVAE(**C["vae"])
    vae.load_state_dict(torch.load(vae_path(work))["model"])
    return vae.eval()


def static_spread(mu):
    """mu [b, z, f, h, w] of still clips -> the variance across latent frames relative to the
    variance of the whole latent (0 when every latent frame is the same)."""
    return mu.float().var(dim=2).mean() / mu.float().var().detach().clamp_min(1e-6)


def phase_vae_tune(args):
    """vae.pt -> vae_tuned.pt: a fresh AdamW run of vae_tune_steps on pairs of (a 17-frame crop,
    the same crop with one of its frames held still), the phase_vae reconstruction loss on both
    plus vae_tune_static_weight * static_spread of the still one's latent."""
    out = os.path.join(args.work, "vae_tuned.pt")
    if not C["vae_tune_steps"] or os.path.exists(out):
        return
    vae = WanVAE(**C["vae"])
    vae.load_state_dict(torch.load(os.path.join(args.work, "vae.pt"))["model"])
    ds = SynthDataset(os.path.join(args.work, "clips"))
    n_train, crop, nf = C["clips"], C["vae_tune_crop"], ds.frames

    def step(gen, k):
        xs, ws = [], []
        for _ in range(C["vae_tune_batch"]):
            i = int(torch.randint(n_train, (1,), generator=gen))
            clip = ds.clip(i)  # [F, H, W, 3] u8
            y0, x0 = crop_origin(gen, object_mask(clip)[0], crop, ds.height, ds.width)
            clip = clip[:, y0:y0 + crop, x0:x0 + crop]
            held = int(torch.randint(nf, (1,), generator=gen))
            for c in (clip, np.repeat(clip[held:held + 1], nf, axis=0)):
                xs.append(torch.from_numpy(np.ascontiguousarray(c)).permute(3, 0, 1, 2))
                ws.append(torch.from_numpy(object_mask(c)))
        x = (torch.stack(xs).float() - 127.5) / 127.5  # [2b, 3, F, crop, crop]: moving, still, ...
        w = 1.0 + C["vae_obj_weight"] * torch.stack(ws).float().unsqueeze(1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(C["vae_tune_bf16"])):
            mu = vae.encode_mu(x)
            rec = vae.decode(mu)
        return vae_recon_loss(rec, x, w, mu) + C["vae_tune_static_weight"] * static_spread(mu[1::2])

    total = C["vae_tune_steps"]
    tr = Trainer("vae_tune", args.work, vae, C["vae_tune_lr"])
    tr.run(total, lambda k: lr_at(k, total, C["vae_tune_lr"], 20), step, clip=C["vae_clip"])
    save_atomic({"model": vae.state_dict(), "seconds": tr.seconds}, out)
    log(f"vae_tune: done in {tr.seconds:.0f} s")


@torch.no_grad()
def phase_latents(args):
    out = os.path.join(args.work, "latents.pt")
    if os.path.exists(out):
        return
    vae = encoding_vae(args.work)
    ds = SynthDataset(dit_clip_dir(args))
    t0 = time.time()
    mus = []
    n = min(C["clips"], C["dit_clips"])
    for i in range(n):
        x = torch.from_numpy(ds.video(i)).unsqueeze(0)
        with dit_autocast():
            mus.append(vae.encode_mu(x).float()[0])  # [16, 5, 32, 32]
        if (i + 1) % 64 == 0:
            log(f"latents: {i + 1}/{n} ({time.time() - t0:.0f} s)")
    mu = torch.stack(mus)
    mean = mu.mean(dim=(0, 2, 3, 4))
    std = mu.std(dim=(0, 2, 3, 4))
    captions = [ds.caption(i) for i in range(n)]
    save_atomic({"mu": mu, "mean": mean, "std": std, "captions": captions,
                 "layout": C["dit_layout"], "seconds": time.time() - t0}, out)
    log("latents: mean", mean.numpy().round(3), "std", std.numpy().round(3))


def downscale(clip, size):
    """uint8 [F, H, W, 3] -> uint8 [F, size, size, 3], box filter (H, W multiples of size)."""
    f, h, w, c = clip.shape
    k = h // size
    x = clip.astype(np.float32).reshape(f, size, k, w // k, k, c).mean((2, 4))
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def lowres_latents(args, n):
    """The VAE latents (unnormalised mu) and object weights' footprints of the first n clips
    downscaled to dit_lowres_size, cached in WORK/latents_lo.pt."""
    out = os.path.join(args.work, f"latents_lo{C['dit_lowres_size']}.pt")
    if os.path.exists(out):
        return torch.load(out)
    vae = encoding_vae(args.work)
    ds = SynthDataset(dit_clip_dir(args))
    t0 = time.time()
    mus, feet = [], []
    for i in range(n):
        small = downscale(ds.clip(i), C["dit_lowres_size"])
        x = torch.from_numpy(to_model(small)).unsqueeze(0)
        with dit_autocast(), torch.no_grad():
            mus.append(vae.encode_mu(x).float()[0])
        feet.append(torch.from_numpy(latent_footprint(object_mask(small))))
        if (i + 1) % 64 == 0:
            log(f"latents_lo: {i + 1}/{n} ({time.time() - t0:.0f} s)")
    result = {"mu": torch.stack(mus), "foot": torch.stack(feet), "seconds": time.time() - t0}
    save_atomic(result, out)
    return result


# Attributes a caption names, each a class the pretraining heads predict from every token.
# Objects are in the manifest's order (the caption's); a missing second object is class "none".
def caption_labels(entries):
    """manifest entries -> (LongTensor [n, attributes], classes per attribute)."""
    bgs = sorted({e["background"] for e in entries})
    cols = sorted({o["color"] for e in entries for o in e["objects"]})
    shapes = sorted({o["shape"] for e in entries for o in e["objects"]})
    motions = sorted({o["motion"] for e in entries for o in e["objects"]})
    vocab = [bgs, [1, 2], cols, shapes, motions, cols + ["none"], shapes + ["none"],
             motions + ["none"]]
    rows = []
    for e in entries:
        objs = e["objects"]
        second = objs[1] if len(objs) > 1 else {"color": "none", "shape": "none", "motion": "none"}
        values = [e["background"], len(objs), objs[0]["color"], objs[0]["shape"], objs[0]["motion"],
                  second["color"], second["shape"], second["motion"]]
        rows.append([v.index(x) for v, x in zip(vocab, values)])
    return torch.tensor(rows), [len(v) for v in vocab]


def phase_t5(args):
    """Teaches the umT5 encoder the caption grammar before the DiT reads it: linear heads on
    every output row (EOS included) must name the caption's background, object count and each
    object's colour, shape and motion. A frozen random encoder let the DiT see which colours a
    caption names but not which one is the background's (docs/vidax-tiny.md); after this every
    row carries the roles as separate features. The heads are dropped; the encoder is rounded to
    bf16 (the exported dtype) and stays frozen while the DiT trains."""
    out = os.path.join(args.work, "t5.pt")
    steps = C["t5_pretrain_steps"]
    if not steps or os.path.exists(out):
        return
    with open(os.path.join(args.work, "captions", "manifest.json")) as f:
        entries = json.load(f)["clips"]
    labels, classes = caption_labels(entries)
    ids = tokenize(os.path.join(args.work, "spiece.model"), [e["caption"] for e in entries])
    held = C["t5_pretrain_holdout"]  # the last captions, never trained on, for the accuracy log
    t5 = make_t5(vocab_size(args.work))
    t5.train()
    heads = nn.ModuleList([nn.Linear(C["t5"]["dim"], k) for k in classes])
    torch.manual_seed(C["seed"] + 4)
    model = nn.ModuleDict({"t5": t5, "heads": heads})

    def loss_and_accuracy(batch):
        lmax = max(len(ids[i]) for i in batch)
        ids_t = torch.zeros(len(batch), lmax, dtype=torch.int64)
        for r, i in enumerate(batch):
            ids_t[r, :len(ids[i])] = torch.tensor(ids[i])
        mask = (ids_t != 0).long()  # pad id 0; every caption ends with EOS (1)
        rows = t5(ids_t, mask).float()  # [B, L, dim]
        valid = mask.bool()
        lab = labels[batch]  # [B, attributes]
        loss, right = 0.0, torch.ones(len(batch), dtype=torch.bool)
        for j, head in enumerate(heads):
            logits = head(rows)  # [B, L, classes]
            want = lab[:, j:j + 1].expand(-1, lmax)
            ce = F.cross_entropy(logits.transpose(1, 2), want, reduction="none")  # [B, L]
            loss = loss + (ce * valid).sum() / valid.sum()
            right &= ((logits.argmax(-1) == want) | ~valid).all(dim=1)
        return loss / len(heads), float(right.float().mean())

    train_n = len(ids) - held

    def step(gen, k):
        batch = torch.randint(train_n, (C["t5_pretrain_batch"],), generator=gen).tolist()
        return loss_and_accuracy(batch)[0]

    tr = Trainer("t5", args.work, model, C["t5_pretrain_lr"])
    tr.run(steps, lambda k: lr_at(k, steps, C["t5_pretrain_lr"], 50), step)
    t5.eval()
    with torch.no_grad():
        _, acc = loss_and_accuracy(list(range(train_n, len(ids))))
        for p in t5.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        _, acc16 = loss_and_accuracy(list(range(train_n, len(ids))))
    log(f"t5: {held} held-out captions, captions with every attribute right on every row {acc:.4f} "
        f"({acc16:.4f} after bf16 rounding)")
    save_atomic({"model": t5.state_dict(), "seconds": tr.seconds, "heldout_accuracy": acc16}, out)


def load_t5(work):
    """The text encoder the DiT reads: the pretrained one when phase t5 ran, else the fixed
    random initialisation."""
    t5 = make_t5(vocab_size(work))
    path = os.path.join(work, "t5.pt")
    if C["t5_pretrain_steps"]:
        t5.load_state_dict(torch.load(path)["model"])
    return t5.eval()


def shard_weighted_mse(pred, target, weight, group):
    """This process's part of the whole batch's weighted mean squared error
    (err * weight).mean() / weight.mean(): pred and target hold the rows group.shard(B) of the
    batch, weight [B, ...] (broadcast over pred's other dimensions) all B rows, whose mean
    normalises. The processes' parts add up to the whole; with one process it is the whole."""
    b = weight.shape[0]
    err = (pred.float() - target) ** 2
    return (err * weight[group.shard(b)]).mean() / weight.mean() * group.share(b)


def phase_dit(args):
    out = os.path.join(args.work, "dit.pt")
    if os.path.exists(out):
        return
    smallest = min(C["dit_batch"], C["dit_lowres_batch"] if C["dit_lowres_steps"] else C["dit_batch"],
                   C["dit_image_batch"] if C["dit_image_every"] else C["dit_batch"])
    if args.procs > smallest:
        sys.exit(f"--procs {args.procs}: more processes than rows in a batch ({smallest})")
    data_parallel.run(args.procs, lambda group: train_dit(args, out, group))


def train_dit(args, out, group):
    """The DiT phase as one of group.size data-parallel processes (data_parallel.py; the
    others' standard output goes to /dev/null)."""
    lat = torch.load(os.path.join(args.work, "latents.pt"))
    # latents.pt is cached: a WORK encoded for the other layout would silently train on it.
    if lat.get("layout", "random") != C["dit_layout"]:
        sys.exit(f"dit: {args.work}/latents.pt holds {lat.get('layout', 'random')}-layout clips, "
                 f"dit_layout is {C['dit_layout']}: remove it (and latents_lo*.pt) to re-encode")
    z = normalised_latents(lat)
    lowres = C["dit_lowres_steps"]
    if lowres:
        # Normalised with the full-size statistics: the same map the exported VAE applies.
        lo = lowres_latents(args, len(z))
        z_lo = (lo["mu"] - lat["mean"].view(1, -1, 1, 1, 1)) / lat["std"].view(1, -1, 1, 1, 1)
        weight_lo = lo["foot"].float() * C["dit_obj_weight"] + 1
        log("dit: low-res latents", tuple(z_lo.shape), "std", round(float(z_lo.std()), 3))
    spm = os.path.join(args.work, "spiece.model")
    t5 = load_t5(args.work)
    ids = tokenize(spm, lat["captions"])
    (ids_null,) = tokenize(spm, [""])
    ctx = encode_texts(t5, ids)
    (ctx_null,) = encode_texts(t5, [ids_null])
    torch.manual_seed(C["seed"] + 3)
    dit = WanDiT(**C["dit"])
    # dit_train_t5: the encoder learns with the DiT (from its fixed random init). The frozen
    # random T5 let the DiT see which colours a caption names but not which one is the
    # background's (docs/vidax-tiny.md); a trained encoder can put the role into each token.
    train_t5 = bool(C["dit_train_t5"])
    if train_t5:
        t5.train()
    # Object tokens weigh 1 + dit_obj_weight in the loss: they are ~6% of the latent voxels, and
    # with a flat loss the DiT learnt the backgrounds and drew unasked-for blobs
    # (docs/vidax-tiny.md).
    ds = SynthDataset(dit_clip_dir(args))
    foot = torch.stack([torch.from_numpy(latent_footprint(object_mask(ds.clip(i))))
                        for i in range(len(z))]).float()  # [N, F, H, W]
    weight = foot * C["dit_obj_weight"] + 1
    if C["dit_edge_weight"]:
        # The band around each object's outline, where shapes differ, weighs dit_edge_weight more.
        weight = weight + C["dit_edge_weight"] * footprint_edge(foot)
    log(f"dit: object voxels {float(foot.mean()):.3f} of the latents")
    # This VAE's latent scale grows with the latent frame (normalised std ~0.56 in frame 0 to
    # ~1.5 in frame 4, per-channel statistics being all the Wan layout can carry), so a flat
    # loss on `noise - x0` undervalues the early frames, whose small latents the decoder
    # amplifies. Frame f weighs 1 / std_f^2 (mean 1 over frames) when dit_frame_balance is on:
    # the loss then counts errors relative to each frame's own scale.
    if C["dit_frame_balance"]:
        fw = 1.0 / z.std(dim=(0, 1, 3, 4)) ** 2
        fw = fw / fw.mean()
        weight = weight * fw.view(1, -1, 1, 1)
        log("dit: frame weights", fw.numpy().round(3))
    # dit_obj_weight_decay p: object voxels weigh 1 + dit_obj_weight (1 - sigma)^p. Any weight
    # that depends on x0 moves the loss's optimum from E[x0 | x_t] to E[w x0 | x_t] / E[w | x_t];
    # at high sigma, where x_t does not yet say where the objects are, a constant 10x object
    # weight makes the optimum paint object colour everywhere (the shipped weights' sigma-1
    # prediction is a uniform mix of object and background colour). The decay keeps the weight
    # where x_t already fixes the footprint.
    decay = C["dit_obj_weight_decay"]
    if decay and C["dit_frame_balance"]:
        sys.exit("dit: dit_obj_weight_decay and dit_frame_balance cannot be combined")

    def rope_for(lat):
        cos, sin = rope_table(lat.shape[2], lat.shape[3] // 2, lat.shape[4] // 2,
                              dit.blocks[0].self_attn.head_dim)
        return cos.float(), sin.float()

    rope = rope_for(z)
    image_every = C["dit_image_every"]
    if image_every < 0:
        sys.exit(f"dit: dit_image_every must be 0 (off) or a step period, got {image_every}")
    image_sigma_min = C["dit_image_sigma_min"]
    if not 0 <= image_sigma_min < 1:
        sys.exit(f"dit: dit_image_sigma_min must be in [0, 1), got {image_sigma_min}")
    # [N, C, 1, H, W]: the first latent frame of every clip, the image it encodes.
    z_img, weight_img = z[:, :, :1], weight[:, :1]
    rope_img = rope_for(z_img)
    rope_lo = rope_for(z_lo) if lowres else None
    shift = C["train_shift"]
    total = lowres + C["dit_steps"]

    def step(gen, k):
        # Steps below `lowres` train on the downscaled clips' latents.
        kind = dit_step_kind(k, lowres, image_every)
        if kind == "lowres":
            zs, ws, rp, bsz = z_lo, weight_lo, rope_lo, C["dit_lowres_batch"]
        elif kind == "image":
            zs, ws, rp, bsz = z_img, weight_img, rope_img, C["dit_image_batch"]
        else:
            zs, ws, rp, bsz = z, weight, rope, C["dit_batch"]
        idx = torch.randint(len(zs), (bsz,), generator=gen)
        drop = torch.rand(bsz, generator=gen) < C["cfg_drop"]
        u = torch.rand(bsz, generator=gen)
        sigma = shift * u / (1 + (shift - 1) * u)
        if kind == "image":
            # dit_image_sigma_min m: image steps only in [m, 1], where the caption still decides
            # what the object looks like (lower, x_t shows it; docs/vidax-tiny.md)
            sigma = image_sigma_min + (1 - image_sigma_min) * sigma
        x0 = zs[idx]
        noise = torch.randn(x0.shape, generator=gen)
        s = sigma.view(-1, 1, 1, 1, 1)
        # Every process draws the whole batch above (the same generator) and runs its shard.
        sh = group.shard(bsz)
        x0, noise, s_sh = x0[sh], noise[sh], s[sh]
        xt = (1 - s_sh) * x0 + s_sh * noise
        rows = range(bsz)[sh]
        if train_t5:
            batch_ids = [ids_null if drop[j] else ids[int(idx[j])] for j in rows]
            contexts = encode_texts_train(t5, batch_ids)
        else:
            contexts = [ctx_null if drop[j] else ctx[int(idx[j])] for j in rows]
        c, bias = dit.compact_context(contexts)
        with dit_training_forward(dit):
            pred = dit(xt, sigma[sh] * 1000, c, rp, bias)
        wt = ws[idx].unsqueeze(1)  # [B, 1, F, H, W], broadcast over channels
        if decay:
            # The object excess fades with the noise: 1 + w_obj (1 - sigma)^decay.
            wt = 1 + (wt - 1) * (1 - s) ** decay
        return shard_weighted_mse(pred, noise - x0, wt, group)

    # One optimiser over both when the encoder trains (a ModuleDict keeps the checkpoint's
    # parameter order fixed).
    model = nn.ModuleDict({"dit": dit, "t5": t5}) if train_t5 else dit
    tr = Trainer("dit", args.work, model, C["dit_lr"], ema=C["dit_ema"], group=group)
    tr.run(total, lambda k: lr_at(k, total, C["dit_lr"], C["dit_warmup"]), step)
    if group.main:
        save_atomic(dit_result(torch.load(tr.ckpt), train_t5), out)
        log(f"dit: done in {tr.seconds:.0f} s")


def dit_step_kind(k, lowres, image_every):
    """What DiT step k trains on: "lowres" (the first `lowres` steps), "image" (every
    image_every-th step after them, 0: never) or "video"."""
    if k < lowres:
        return "lowres"
    if image_every and (k - lowres) % image_every == image_every - 1:
        return "image"
    return "video"


def dit_result(ckpt, train_t5, raw=False):
    """dit.pt from a DiT trainer checkpoint: the EMA weights when the run kept them (the raw
    ones as model_raw), and the encoder's under "t5" when it trained with the DiT. raw: the
    trained weights as "model" even when the run kept an average (a fork whose average still
    holds the old run's weights)."""
    weights = ckpt["ema"] if ckpt.get("ema") is not None and not raw else ckpt["model"]
    if train_t5:  # a ModuleDict {"dit", "t5"}
        pick = lambda sd, p: {k[len(p):]: v for k, v in sd.items() if k.startswith(p)}
        result = {"model": pick(weights, "dit."), "t5": pick(weights, "t5.")}
    else:
        result = {"model": weights}
    if ckpt.get("ema") is not None:
        result["model_raw"] = ckpt["model"]
    result.update(seconds=ckpt["seconds"], step=ckpt["step"])
    return result


def phase_export(args):
    w, out = args.work, args.out
    os.makedirs(os.path.join(out, "google", "umt5-xxl"), exist_ok=True)
    shutil.copyfile(os.path.join(w, "spiece.model"), os.path.join(out, "google", "umt5-xxl", "spiece.model"))
    t5 = load_t5(w)
    if args.from_checkpoint is not None:
        # A run still in progress (or stopped): its checkpoint's weights at the step reached.
        ckpt = torch.load(args.from_checkpoint or os.path.join(w, "dit_ckpt.pt"))
        dit_state = dit_result(ckpt, bool(C["dit_train_t5"]), raw=args.raw)
        log(f"export: DiT checkpoint at step {ckpt['step']}"
            f"{' (EMA weights)' if ckpt.get('ema') is not None and not args.raw else ''}")
    else:
        dit_state = torch.load(os.path.join(w, "dit.pt"))
    if "t5" in dit_state:  # trained with the DiT (dit_train_t5)
        t5.load_state_dict(dit_state["t5"])
    torch.save({k: v.to(torch.bfloat16) for k, v in t5.state_dict().items()},
               os.path.join(out, "models_t5_umt5-xxl-enc-bf16.pth"))
    vae = WanVAE(**C["vae"])
    vae.load_state_dict(torch.load(vae_path(w))["model"])
    lat = torch.load(os.path.join(w, "latents.pt"))
    fold_latent_stats(vae, lat["mean"].tolist(), lat["std"].tolist())
    torch.save({k: v.float() for k, v in vae.state_dict().items()}, os.path.join(out, "Wan2.1_VAE.pth"))
    dit = WanDiT(**C["dit"])
    dit.load_state_dict(dit_state["model"])
    write_safetensors(os.path.join(out, "diffusion_pytorch_model.safetensors"),
                      {k: v.float() for k, v in dit.state_dict().items()})
    # vidax_model: lets `vidax eval --model DIR` pick vidax-tiny's settings for a copy of the
    # folder anywhere (the DiT config reader ignores keys it does not know).
    cfg = dict(C["dit"], model_type="t2v", patch_size=[1, 2, 2], eps=1e-6, qk_norm=True,
               cross_attn_norm=True, vidax_model="vidax-tiny")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(sorted(cfg.items())), f, indent=1)
        f.write("\n")
    log("export: wrote", out)


PHASES = {"tokenizer": phase_tokenizer, "data": phase_data, "vae": phase_vae,
          "vae_tune": phase_vae_tune, "latents": phase_latents, "t5": phase_t5, "dit": phase_dit, "export": phase_export}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=list(PHASES) + ["all"])
    ap.add_argument("--work", default="build/vidax-tiny-work")
    ap.add_argument("--out", default="models/vidax-tiny")
    ap.add_argument("--vidax", default="build/release/vidax")
    ap.add_argument("--from-checkpoint", nargs="?", const="", metavar="CKPT",
                    help="export: take the DiT from a trainer checkpoint (default WORK/dit_ckpt.pt, a run "
                         "in progress) instead of WORK/dit.pt")
    ap.add_argument("--raw", action="store_true",
                    help="export --from-checkpoint: the trained DiT weights, not their moving average")
    ap.add_argument("--procs", type=int, default=1, metavar="N",
                    help="dit: N data-parallel processes of one thread each, ~N times the steps per "
                         "second on N free cores; the same run up to float summation order "
                         "(data_parallel.py)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scalar CONFIG entry, or one of a model dict as dit.text_len=64 (changes the result)")
    args = ap.parse_args()
    if args.procs != 1 and args.phase not in ("dit", "all"):
        ap.error("--procs applies to the dit phase only")
    if args.raw and (args.phase != "export" or args.from_checkpoint is None):
        ap.error("--raw applies to export --from-checkpoint only")
    apply_overrides(args.set)
    torch.set_num_threads(C["threads"])
    os.makedirs(args.work, exist_ok=True)
    for name in (PHASES if args.phase == "all" else [args.phase]):
        PHASES[name](args)


if __name__ == "__main__":
    main()
