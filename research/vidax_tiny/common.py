"""Shared pieces of the vidax-tiny tools: the family's hyper-parameters, a minimal safetensors
writer/reader for torch tensors (no `safetensors` package on this machine), tokenisation with
Debian's spm_encode, and the fixed-random umT5 encoder.

Everything that changes the shipped weights lives in CONFIG, so the one command in train.sh
reproduces them (bit-exact only with the same torch build and thread count: reductions in
oneDNN/BLAS kernels depend on both).
"""
import json
import os
import struct
import subprocess

import numpy as np
import torch

from models import T5Encoder

CONFIG = {
    "seed": 20261130,
    # data: `vidax synth` clip i has seed data_seed + i; captions for the tokenizer come from a
    # separate, larger caption-only export.
    "data_seed": 1000000,
    "clips": 768,               # 256x256x17 clips for the VAE
    "holdout": 4,               # further clips (seeds after the training ones) for the PSNR gate
    "dit_clips": 512,           # the first ones, encoded once for the DiT
    "caption_clips": 20000,     # captions only (1-frame 16x16 renders) for the tokenizer
    "size": 256, "frames": 17,
    # tokenizer (spm_train, umT5 special ids). "word" makes every caption word one piece (45 on
    # this corpus); unigram spells the shape words letter by letter (docs/vidax-tiny.md).
    "vocab": 128, "tokenizer_type": "unigram",
    # umT5 encoder: fixed random init (official init_weights scales), stored as bf16
    "t5": dict(dim=64, dim_attn=64, dim_ffn=128, num_heads=4, num_layers=2, num_buckets=32),
    # Wan 2.1 VAE
    "vae": dict(dim=8, z_dim=16, dim_mult=[1, 2, 4, 8], num_res_blocks=1,
                temporal_downsample=[False, True, True]),
    # Three stages in one resumable run (batch, crop, frames chosen by the step):
    #   steps 0 .. vae_warm_steps: 32x32 x 5 frames (first frame + one 4-frame chunk);
    #   .. vae_steps: 32x32 x 9 frames (first frame + two 4-frame chunks, so the cross-chunk
    #      causal path, latent frame 2 reading frame 1's history, is trained), both at the
    #      constant rate;
    #   .. vae_steps + vae_big_steps: 128x128 x 9 frames (the middle attention sees 16x16
    #      tokens instead of 4x4) while the rate decays (cosine) to 10%.
    # The VAE starts from init_vae_for_training (models.py); PyTorch's default init sat on a
    # grey plateau for hundreds of steps (docs/vidax-tiny.md). A share of the crops is centred
    # on an object and object pixels weigh more in the loss: objects are a few percent of the
    # pixels and the previous VAE lost their colours.
    "vae_warm_steps": 450, "vae_steps": 1000, "vae_batch": 8, "vae_crop": 32,
    "vae_warm_frames": 5, "vae_crop_frames": 9,
    "vae_big_steps": 900, "vae_big_batch": 2, "vae_big_crop": 128,
    "vae_lr": 1e-3, "vae_clip": 5.0, "vae_gate_every": 500,
    "vae_centre_crops": 0.5, "vae_obj_weight": 3.0,
    # A fourth stage on whole 17-frame clips (128x128 crops): with at most 3 latent frames in
    # training, latent frames 3 and 4 of a 17-frame clip drifted (object areas x3..x25 and
    # 17 dB in frames 13..16 against 30 dB in frame 0 at step 1,100), since their receptive
    # field reaches no zero padding, a case 9-frame crops never show. Low rate, cosine to 10%.
    "vae_long_steps": 400, "vae_long_batch": 1, "vae_long_crop": 128, "vae_long_frames": 17,
    "vae_long_lr": 2e-4,
    # A fine-tuning phase after the VAE (train.py phase_vae_tune; 0 = off): the same
    # reconstruction loss on whole 17-frame crops plus a static-consistency term, the latent's
    # variance across latent frames of a still clip (one frame repeated), relative to the
    # latent's variance. The VAE above encodes an unchanging black background as latents that
    # drift across the 5 latent frames (channel 0: -0.78, 0.06, 0.06, 0.91, 1.15): a caption
    # then fixes the background's latent only together with the frame index, which the DiT
    # cannot read at sigma ~1 (RoPE is relative; nothing else in Wan's DiT knows positions).
    # 800 steps took the spread from 0.33 to 0.005, but DiTs trained on the tuned latents were
    # no better (2026-12-01, docs/vidax-tiny.md), so it stays off in the shipped recipe.
    "vae_tune_steps": 0, "vae_tune_batch": 1, "vae_tune_crop": 64, "vae_tune_lr": 2e-4,
    "vae_tune_static_weight": 1.0, "vae_tune_bf16": 0,
    # Wan 2.1 T2V DiT: 2 heads of 64 (config.json carries num_heads; per-head sparse attention
    # policies need more than one head to route)
    "dit": dict(dim=128, ffn_dim=512, num_heads=2, num_layers=4, text_dim=64, freq_dim=256,
                in_dim=16, out_dim=16, text_len=512),
    # The DiT's clips: "random" (the shipped run) trains on the VAE's own clips; "canonical"
    # on the same seeds drawn with `vidax synth --layout canonical` (object placement fixed by
    # the caption). Canonical was tried on 2026-12-01 and did not beat random (docs/vidax-tiny.md).
    # "large": the same captions with ~1.5x larger objects (vidax synth --layout large).
    "dit_layout": "random",
    # bf16 autocast for the latents and the DiT (0: f32). The shipped run used bf16 (AMX);
    # PyTorch's bf16 CPU kernels are a scalar fallback without AVX-512 (26 s per DiT step
    # instead of 2.6 s in f32 on an AVX2-only Zen 3), so runs there need 0.
    "dit_bf16": 1,
    # The GELU form of the DiT's training forward: "tanh" (Wan's, the shipped run) or "erf".
    # Debian's torch 1.13 has a slow tanh: the tanh form's forward and backward took 28% of a
    # bf16 stills step (profile, 2026-12-03), the erf form's about a ninth as long. The two differ
    # by at most 4.7e-4, a fifth of the mean rounding of a bf16 input (2.2e-3), so under bf16
    # autocast the erf form only trains faster (1.24-1.30x); scoring, probes and export keep
    # the tanh form (models.gelu_form; docs/vidax-tiny.md, Throughput).
    "dit_train_gelu": "tanh",
    "dit_steps": 3000, "dit_batch": 4, "dit_lr": 1e-3, "dit_warmup": 100,
    # Exponential moving average of the DiT weights (0: off, the shipped run); dit.pt then holds
    # the average (train.py Trainer, dit_result).
    "dit_ema": 0.0,
    "dit_obj_weight": 9.0,      # object voxels weigh 1 + this in the flow-matching loss
    # ... times (1 - sigma)^this when > 0 (train.py phase_dit). 1 was tried on 2026-12-01: the
    # sigma-1 prediction beat the dataset mean for the first time, the suite did not improve
    # (docs/vidax-tiny.md), so the shipped value stays.
    "dit_obj_weight_decay": 0.0,
    # Latent voxels within one of an object's outline weigh this much more (train.py
    # footprint_edge; faded with dit_obj_weight_decay like the object weight): where a circle
    # and a square differ. Tried on 2026-12-02 (docs/vidax-tiny.md).
    "dit_edge_weight": 0.0,
    # A shape probe (stills.py train only; 0: off): a linear head on the tokens after the first
    # dit_probe_layer blocks names the shape under each token (background, circle, square,
    # triangle, from the renderer's scene), cross-entropy weighted like the object voxels, added
    # to the flow-matching loss times this. Supervision of the hidden state as REPA does with a
    # pretrained encoder's features; the head is dropped, the exported DiT is plain Wan.
    "dit_probe_weight": 0.0, "dit_probe_layer": 2,
    # 4: the probe names the shape in each of the token's 4x4 cells of 4x4 pixels instead (a
    # square's corner cells are square, a circle's background: the difference the DiT misses).
    # Run Q1 (2026-12-03, docs/vidax-tiny.md): triangles as soon as per token, colours kept,
    # still no squares at 160,000 stills.
    "dit_probe_cells": 1,
    "dit_frame_balance": 0,     # latent frame f weighs 1 / std_f^2 (train.py phase_dit)
    "train_shift": 3.0,         # sigma = shift u / (1 + (shift - 1) u), u ~ U(0, 1)
    # umT5 pretraining on the captions (train.py phase_t5; 0 = the fixed random encoder): heads
    # on every output row name the caption's attributes; the encoder then stays frozen.
    "t5_pretrain_steps": 0, "t5_pretrain_batch": 64, "t5_pretrain_lr": 3e-3,
    "t5_pretrain_holdout": 1000,
    "dit_train_t5": 0,          # 1: the umT5 encoder trains with the DiT (train.py phase_dit)
    # A first phase at low resolution (train.py phase_dit): dit_lowres_steps steps on the
    # latents of the same clips downscaled to dit_lowres_size (4x fewer tokens at 128), batch
    # dit_lowres_batch, before the dit_steps full-size ones; one rate schedule over both.
    "dit_lowres_steps": 0, "dit_lowres_size": 128, "dit_lowres_batch": 8,
    # Joint image-video training, as Wan trains (an image is a 1-frame video): every
    # dit_image_every-th step (0: never) trains on the first latent frames alone (a causal VAE's
    # latent frame 0 encodes pixel frame 0 alone), batch dit_image_batch: 256 tokens instead of
    # 1,280, so more captions per second for what one frame shows (colour, shape, background).
    # dit_image_sigma_min m > 0 maps image steps' sigma to m + (1 - m) sigma.
    "dit_image_every": 0, "dit_image_batch": 16, "dit_image_sigma_min": 0.0,
    "cfg_drop": 0.1,            # share of captions replaced by the empty prompt ""
    "threads": 1,  # 2 OpenMP threads: 30x slower with the other core busy, no faster with it free
}

# The synthetic world's shape words and object colour words (docs/synthetic-world.md).
SHAPES = ("circle", "square", "triangle")
COLOURS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "white")


def apply_overrides(pairs):
    """KEY=VALUE strings (train.py / probe.py --set) -> CONFIG, each value converted to the
    entry's type; "dit.text_len=64" sets an entry of one of CONFIG's model dicts."""
    for kv in pairs:
        k, _, v = kv.partition("=")
        top, _, sub = k.partition(".")
        table, key = (CONFIG.get(top), sub) if sub else (CONFIG, k)
        if not isinstance(table, dict) or key not in table or isinstance(table[key], (dict, list)):
            raise SystemExit(f"--set: unknown scalar CONFIG key '{k}'")
        table[key] = type(table[key])(v)


_ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64",
              torch.int32: "I32", torch.float16: "F16"}
_ST_BACK = {v: k for k, v in _ST_DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    """name -> torch tensor, written in name order with 8-byte aligned header."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = _ST_BACK[e["dtype"]]
        if dt == torch.bfloat16:
            arr = np.frombuffer(data[b:end], dtype=np.int16).copy()
            t = torch.from_numpy(arr).view(torch.bfloat16)
        else:
            arr = np.frombuffer(data[b:end], dtype=torch.empty(0, dtype=dt).numpy().dtype).copy()
            t = torch.from_numpy(arr)
        out[name] = t.reshape(e["shape"])
    return out


def tokenize(spiece_model, texts):
    """ids per text as umT5 sees it: spm pieces + EOS (1). Texts must be one line each."""
    if not texts:
        return []
    inp = "\n".join(texts) + "\n"
    res = subprocess.run(["spm_encode", f"--model={spiece_model}", "--output_format=id"],
                         input=inp.encode(), stdout=subprocess.PIPE, check=True)
    lines = res.stdout.decode().split("\n")[:len(texts)]
    return [[int(v) for v in line.split()] + [1] for line in lines]


def make_t5(vocab):
    c = CONFIG["t5"]
    t5 = T5Encoder(vocab, c["dim"], c["dim_attn"], c["dim_ffn"], c["num_heads"], c["num_layers"],
                   c["num_buckets"])
    t5.init_fixed_random(torch.Generator().manual_seed(CONFIG["seed"] + 1))
    return t5.eval()


def encode_texts_train(t5, ids_list):
    """encode_texts with gradients, one padded batch: [L_i, dim] per text. The key mask keeps
    padding out of every valid row, so each row equals the text's unpadded encoding."""
    lmax = max(len(ids) for ids in ids_list)
    ids_t = torch.zeros(len(ids_list), lmax, dtype=torch.int64)
    mask = torch.zeros_like(ids_t)
    for i, ids in enumerate(ids_list):
        ids_t[i, :len(ids)] = torch.tensor(ids)
        mask[i, :len(ids)] = 1
    out = t5(ids_t, mask).float()
    return [out[i, :len(ids)] for i, ids in enumerate(ids_list)]


@torch.no_grad()
def encode_texts(t5, ids_list):
    """[L_i, dim] f32 per text (the tokens up to and including EOS, as the pipeline keeps them)."""
    out = []
    for ids in ids_list:
        ids_t = torch.tensor([ids], dtype=torch.int64)
        out.append(t5(ids_t, torch.ones_like(ids_t))[0].float())
    return out
