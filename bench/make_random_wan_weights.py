#!/usr/bin/env python3
"""Writes a Wan 2.1 t2v DiT weights file with seeded random values, for speed benchmarks.

The file is a safetensors file with the official `WanModel.state_dict()` names and shapes and
the constructor config as JSON in `__metadata__["config"]` (same layout as the golden fixtures).
Values (nothing zero, activations stay O(1)):
  Linear / patch-embedding weights ~ N(0, 1/fan_in), fan_in = prod(shape[1:])
  biases                           ~ N(0, 0.05^2)
  RMSNorm / LayerNorm weights      ~ 1 + N(0, 0.1^2); LayerNorm biases ~ N(0, 0.05^2)
  modulation tables                ~ N(0, 0.1^2)
Everything is drawn in float32 from one torch CPU generator seeded with --seed, tensor by tensor
in the order listed by `tensor_specs`, then rounded (round-to-nearest-even) to --dtype.
Same seed + same torch version -> byte-identical file.

  python3 bench/make_random_wan_weights.py --config wan2.1-t2v-1.3b --out /tmp/w.safetensors
"""

import argparse
import json
import math
import struct
import sys
import time

import torch

CONFIGS = {
    # Wan2.1-T2V-1.3B (config.json of the official checkpoint)
    "wan2.1-t2v-1.3b": {
        "patch_size": [1, 2, 2], "text_len": 512, "in_dim": 16, "dim": 1536, "ffn_dim": 8960,
        "freq_dim": 256, "text_dim": 4096, "out_dim": 16, "num_heads": 12, "num_layers": 30,
        "window_size": [-1, -1], "qk_norm": True, "cross_attn_norm": True, "eps": 1e-06,
    },
    # Wan2.1-T2V-14B (28 GB in bf16; listed for completeness)
    "wan2.1-t2v-14b": {
        "patch_size": [1, 2, 2], "text_len": 512, "in_dim": 16, "dim": 5120, "ffn_dim": 13824,
        "freq_dim": 256, "text_dim": 4096, "out_dim": 16, "num_heads": 40, "num_layers": 40,
        "window_size": [-1, -1], "qk_norm": True, "cross_attn_norm": True, "eps": 1e-06,
    },
    # = the dit_t2v_tiny golden fixture config (shared/fixtures/wan/README.md section 5.1)
    "tiny": {
        "patch_size": [1, 2, 2], "text_len": 16, "in_dim": 16, "dim": 256, "ffn_dim": 512,
        "freq_dim": 256, "text_dim": 64, "out_dim": 16, "num_heads": 2, "num_layers": 2,
        "window_size": [-1, -1], "qk_norm": True, "cross_attn_norm": True, "eps": 1e-06,
    },
}

_DTYPES = {"bf16": ("BF16", torch.bfloat16, 2), "f32": ("F32", torch.float32, 4)}


def tensor_specs(cfg):
    """[(name, shape, kind)] in official state_dict order; kind selects the distribution."""
    d, ffn = cfg["dim"], cfg["ffn_dim"]
    pt, ph, pw = cfg["patch_size"]
    specs = [
        ("patch_embedding.weight", [d, cfg["in_dim"], pt, ph, pw], "w"),
        ("patch_embedding.bias", [d], "b"),
        ("text_embedding.0.weight", [d, cfg["text_dim"]], "w"),
        ("text_embedding.0.bias", [d], "b"),
        ("text_embedding.2.weight", [d, d], "w"),
        ("text_embedding.2.bias", [d], "b"),
        ("time_embedding.0.weight", [d, cfg["freq_dim"]], "w"),
        ("time_embedding.0.bias", [d], "b"),
        ("time_embedding.2.weight", [d, d], "w"),
        ("time_embedding.2.bias", [d], "b"),
        ("time_projection.1.weight", [6 * d, d], "w"),
        ("time_projection.1.bias", [6 * d], "b"),
    ]
    for i in range(cfg["num_layers"]):
        p = f"blocks.{i}."
        specs.append((p + "modulation", [1, 6, d], "mod"))
        for a in ("self_attn", "cross_attn"):
            for n in ("q", "k", "v", "o"):
                specs += [(p + f"{a}.{n}.weight", [d, d], "w"), (p + f"{a}.{n}.bias", [d], "b")]
            specs += [(p + f"{a}.norm_q.weight", [d], "g"), (p + f"{a}.norm_k.weight", [d], "g")]
            if a == "self_attn":
                specs += [(p + "norm3.weight", [d], "g"), (p + "norm3.bias", [d], "b")]
        specs += [
            (p + "ffn.0.weight", [ffn, d], "w"), (p + "ffn.0.bias", [ffn], "b"),
            (p + "ffn.2.weight", [d, ffn], "w"), (p + "ffn.2.bias", [d], "b"),
        ]
    specs += [
        ("head.modulation", [1, 2, d], "mod"),
        ("head.head.weight", [cfg["out_dim"] * pt * ph * pw, d], "w"),
        ("head.head.bias", [cfg["out_dim"] * pt * ph * pw], "b"),
    ]
    return specs


def _draw(shape, kind, gen):
    x = torch.randn(*shape, generator=gen, dtype=torch.float32)
    if kind == "w":
        return x.mul_(1.0 / math.sqrt(math.prod(shape[1:])))
    if kind == "b":
        return x.mul_(0.05)
    if kind == "g":
        return x.mul_(0.1).add_(1.0)
    if kind == "mod":
        return x.mul_(0.1)
    raise ValueError(kind)


def write_random_weights(path, cfg, dtype="bf16", seed=0, name=""):
    """Writes the file; returns the number of parameters."""
    st_dtype, tdtype, itemsize = _DTYPES[dtype]
    specs = tensor_specs(cfg)
    header, offset = {}, 0
    for n, shape, _ in specs:
        nbytes = math.prod(shape) * itemsize
        header[n] = {"dtype": st_dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = {
        "config": json.dumps(cfg),
        "format": "pt",
        "source": f"bench/make_random_wan_weights.py config={name or 'custom'} dtype={dtype} "
                  f"seed={seed} torch={torch.__version__} (random weights, not a real model)",
    }
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)  # data starts 8-byte aligned
    gen = torch.Generator().manual_seed(seed)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for n, shape, kind in specs:
            t = _draw(shape, kind, gen).to(tdtype).contiguous()
            if tdtype == torch.bfloat16:
                t = t.view(torch.int16)  # numpy has no bfloat16; same bits
            f.write(t.numpy().data)  # zero-copy write of the raw little-endian bytes
    return sum(math.prod(s) for _, s, _ in specs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="wan2.1-t2v-1.3b", choices=sorted(CONFIGS))
    p.add_argument("--out", required=True, help="output .safetensors path")
    p.add_argument("--dtype", default="bf16", choices=sorted(_DTYPES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-layers", type=int, help="override num_layers (quick tests)")
    a = p.parse_args(argv)
    cfg = dict(CONFIGS[a.config])
    if a.num_layers is not None:
        cfg["num_layers"] = a.num_layers
    t0 = time.perf_counter()
    n = write_random_weights(a.out, cfg, a.dtype, a.seed, a.config)
    print(f"wrote {a.out}: {a.config} {n / 1e6:.1f}M params as {a.dtype} "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
