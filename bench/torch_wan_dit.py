#!/usr/bin/env python3
"""Eager PyTorch peer of the Wan 2.1 DiT forward (text-to-video), for vidax benchmarks.

Written from the description in shared/fixtures/wan/README.md (sections 3, 5.1 and 6); it does
not import or copy the official module. It exists so that `bench/compare_dit.py` can time the
same forward, on the same weights and inputs, in PyTorch and in vidax.

Precision modes
  fp32  everything in float32 (what the golden fixtures were made with).
  bf16  what the official pipeline does: the DiT runs under bf16 autocast
        (`torch.autocast("cpu", dtype=torch.bfloat16)` here); the residual stream, norms,
        modulation, time embedding and the head stay float32 (the official code wraps those
        in float32 autocast regions); attention takes bf16 q/k/v like the official
        flash-attention call. Linear weights are held in bf16 once at load time (the official
        pipeline keeps f32 master weights and lets autocast cast them; pre-casting only
        removes that overhead from the PyTorch side); `--master-weights f32` does what the
        official pipeline does.

GEMM backend for float32 products (`--gemm`)
  mkldnn  (default) float32 linears and attention products go through PyTorch's bundled
          oneDNN (`torch._C._nn.mkldnn_linear`). Debian's python3-torch links the netlib
          reference BLAS, which runs float32 `torch.mm` at ~3 GFLOP/s on this machine;
          pip wheels use MKL. oneDNN is the fast float32 path this torch build has.
  native  plain `F.linear` / `torch.bmm` (whatever BLAS torch was linked with).
  bf16 products under autocast are always torch's own choice (oneDNN, AMX where present).

Modes of use
  --check-fixtures DIR   run fp32 on dit_t2v_tiny and print max |out - ref| (must be <= 1e-4)
  --bench                time forwards on a weights file (see compare_dit.py), print JSON

Weights use the official state_dict names; files are read with the small safetensors reader
below (F32, BF16, F16, I64, I32). The config is `__metadata__["config"]` of the weights file.
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------
# safetensors reader: u64 LE header length, JSON header, raw little-endian row-major data.
# --------------------------------------------------------------------------------------------

_ST_DTYPES = {
    "F32": (np.dtype("<f4"), torch.float32),
    "F16": (np.dtype("<f2"), torch.float16),
    "BF16": (np.dtype("<i2"), torch.bfloat16),  # read the bits as int16, then view as bf16
    "I64": (np.dtype("<i8"), torch.int64),
    "I32": (np.dtype("<i4"), torch.int32),
}


def read_safetensors_header(path):
    """Returns (header dict without __metadata__, metadata dict, absolute data start)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        size = os.fstat(f.fileno()).st_size
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} exceeds the file size {size}")
        header = json.loads(f.read(n).decode("utf-8"))
    meta = header.pop("__metadata__", None) or {}
    return header, meta, 8 + n


def load_safetensors(path, names=None):
    """Reads tensors (all, or those in `names`) into fresh CPU tensors; returns (dict, metadata).

    Reads with readinto() into private buffers rather than mmap, so the process RSS holds one
    copy of the weights and no file-backed pages (keeps the peak-RSS figure honest).
    """
    header, meta, start = read_safetensors_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if names is not None and name not in names:
                continue
            dtype = info["dtype"]
            if dtype not in _ST_DTYPES:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
            npdt, tdt = _ST_DTYPES[dtype]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(v) for v in info["data_offsets"])
            count = math.prod(shape)
            if end - begin != count * npdt.itemsize:
                raise ValueError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape}")
            arr = np.empty(count, dtype=npdt)
            f.seek(start + begin)
            got = f.readinto(memoryview(arr).cast("B")) if count else 0
            if got != end - begin:
                raise ValueError(f"{path}: tensor {name}: truncated data")
            t = torch.from_numpy(arr)
            if tdt == torch.bfloat16:
                t = t.view(torch.bfloat16)
            out[name] = t.reshape(shape)
    return out, meta


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------

CONFIG_DEFAULTS = {
    "patch_size": [1, 2, 2], "text_len": 512, "in_dim": 16, "dim": 1536, "ffn_dim": 8960,
    "freq_dim": 256, "text_dim": 4096, "out_dim": 16, "num_heads": 12, "num_layers": 30,
    "qk_norm": True, "cross_attn_norm": True, "eps": 1e-6,
}


def _release_free_heap():
    """Hands freed heap pages back to the OS (glibc keeps freed chunks below 32 MB in its heap,
    so converting weights tensor by tensor would otherwise leave the source copies counted in
    the RSS, and the peak-RSS figure would depend on allocation order)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _no_autocast():
    return torch.autocast("cpu", enabled=False)


class Linear:
    """y = x W^T + b with a chosen backend.

    kind "autocast": F.linear on bf16 weights; the caller runs it under bf16 autocast.
    kind "autocast_f32": F.linear on f32 weights under bf16 autocast, which casts them on every
                     call (what the official pipeline does with its f32 master weights).
    kind "mkldnn":   float32 through oneDNN (weight pre-packed as an mkldnn tensor).
    kind "native":   float32 F.linear.
    """

    def __init__(self, w, b, kind):
        self.kind = kind
        self.out_features = w.shape[0]
        if kind == "autocast":
            self.w = w.to(torch.bfloat16).contiguous()
            self.b = None if b is None else b.to(torch.bfloat16)
        elif kind == "autocast_f32":
            self.w = w.float().contiguous()
            self.b = None if b is None else b.float()
        elif kind == "mkldnn":
            self.w = w.float().contiguous().to_mkldnn()
            self.b = None if b is None else b.float().contiguous()
        else:
            self.w = w.float().contiguous()
            self.b = None if b is None else b.float().contiguous()

    def __call__(self, x):
        if self.kind == "mkldnn":
            lead = x.shape[:-1]
            x2 = x.reshape(-1, x.shape[-1]).float().contiguous()
            y = torch._C._nn.mkldnn_linear(x2.to_mkldnn(), self.w, self.b).to_dense()
            return y.reshape(*lead, self.out_features)
        return F.linear(x, self.w, self.b)


def rms_norm(x, w, eps):
    """WanRMSNorm over the full last dim; statistic in f32, result cast back like the original."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return y.to(x.dtype) * w


def sinusoid_f64(freq_dim, t):
    """[B] -> [B, freq_dim] float32; computed in float64, cos first."""
    half = freq_dim // 2
    pos = t.to(torch.float64)
    inv = torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                    -torch.arange(half, dtype=torch.float64) / half)
    ang = torch.outer(pos, inv)
    return torch.cat([torch.cos(ang), torch.sin(ang)], dim=1).float()


def rope_tables(head_dim, max_pos=1024):
    """Three complex128 tables [max_pos, a/2] for the frame/row/column axes.

    Axis widths (real channels) for head_dim 128: 44 / 42 / 42; angle = p / 10000^(2i/a).
    """
    a_hw = 2 * (head_dim // 6)
    a_f = head_dim - 2 * a_hw
    tables = []
    for a in (a_f, a_hw, a_hw):
        inv = 1.0 / torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                              torch.arange(0, a, 2, dtype=torch.float64) / a)
        ang = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
        tables.append(torch.polar(torch.ones_like(ang), ang))
    return tables


def rope_freqs(tables, grid):
    """Per-token complex128 rotations [L, 1, head_dim/2] for a (F, H, W) token grid."""
    f, h, w = grid
    for n, tab in zip((f, h, w), tables):
        if n > tab.shape[0]:
            raise ValueError(f"RoPE supports at most {tab.shape[0]} positions per axis, got {n}")
    parts = [
        tables[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1),
        tables[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
        tables[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
    ]
    return torch.cat(parts, dim=-1).reshape(f * h * w, 1, -1)


def rope_apply(x, freqs, num_heads):
    """x [L, dim] -> rotated [L, heads, head_dim] float32; pairs (2i, 2i+1) rotate in complex128."""
    L = x.shape[0]
    xc = torch.view_as_complex(x.to(torch.float64).reshape(L, num_heads, -1, 2))
    return torch.view_as_real(xc * freqs).reshape(L, num_heads, -1).float()


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------

# Bound on the attention score buffer, so large videos chunk the queries instead of allocating
# [heads, L, L] at once.
_SCORE_BYTES = 512 << 20


def attention(q, k, v, mode):
    """Softmax attention, heads independent, no mask.

    q [Lq, H, d], k/v [Lk, H, d] (any float dtype) -> [Lq, H*d]
    mode: "bf16" (bf16 products under autocast, like flash-attention's bf16 inputs),
          "mkldnn" (f32 via oneDNN, per head), "native" (f32 torch.bmm).
    """
    Lq, H, d = q.shape
    Lk = k.shape[0]
    scale = 1.0 / math.sqrt(d)
    if mode == "mkldnn":
        out = torch.empty(Lq, H, d, dtype=torch.float32)
        for h in range(H):
            kh = k[:, h].float().contiguous().to_mkldnn()  # [Lk, d]: scores = q kh^T
            vt = v[:, h].float().t().contiguous().to_mkldnn()  # [d, Lk]: out = p vt^T
            qh = q[:, h].float()
            step = max(1, _SCORE_BYTES // (Lk * 4 * 2))
            for s in range(0, Lq, step):
                qs = (qh[s:s + step] * scale).contiguous()
                sc = torch._C._nn.mkldnn_linear(qs.to_mkldnn(), kh, None).to_dense()
                p = torch.softmax(sc, dim=-1)
                out[s:s + step, h] = torch._C._nn.mkldnn_linear(p.to_mkldnn(), vt, None).to_dense()
        return out.reshape(Lq, H * d)

    dt = torch.bfloat16 if mode == "bf16" else torch.float32
    qh = (q.float() * scale).to(dt).transpose(0, 1).contiguous()  # [H, Lq, d]
    kt = k.to(dt).permute(1, 2, 0).contiguous()  # [H, d, Lk]
    vh = v.to(dt).transpose(0, 1).contiguous()  # [H, Lk, d]
    out = torch.empty(Lq, H, d, dtype=dt)
    step = max(1, _SCORE_BYTES // (H * Lk * (2 if dt == torch.bfloat16 else 4) * 2))
    for s in range(0, Lq, step):
        sc = torch.bmm(qh[:, s:s + step], kt)  # [H, lq, Lk]
        p = torch.softmax(sc, dim=-1)  # bf16 in/out; torch accumulates in f32 internally
        out[s:s + step] = torch.bmm(p, vh).transpose(0, 1)
    return out.reshape(Lq, H * d)


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


class WanDiT:
    """Wan 2.1 t2v DiT, batch 1, eager. `sd`: official state_dict names -> tensors."""

    def __init__(self, sd, cfg, precision="fp32", gemm="mkldnn", master="bf16"):
        if master not in ("bf16", "f32"):
            raise ValueError(f"master weights must be bf16 or f32, got {master}")
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be fp32 or bf16, got {precision}")
        if gemm not in ("mkldnn", "native"):
            raise ValueError(f"gemm must be mkldnn or native, got {gemm}")
        if gemm == "mkldnn" and not torch.backends.mkldnn.is_available():
            gemm = "native"
        c = dict(CONFIG_DEFAULTS)
        c.update(cfg)
        self.cfg = c
        self.precision, self.gemm = precision, gemm
        self.dim, self.heads = c["dim"], c["num_heads"]
        self.eps = float(c["eps"])
        self.patch = tuple(c["patch_size"])
        self.text_len, self.out_dim = c["text_len"], c["out_dim"]
        self.freq_dim = c["freq_dim"]
        if not c.get("qk_norm", True) or not c.get("cross_attn_norm", True):
            raise ValueError("only qk_norm=True, cross_attn_norm=True (all Wan 2.1 models)")

        f32_kind = gemm  # float32 regions (time embedding, head; everything in fp32 mode)
        low_kind = gemm
        if precision == "bf16":
            low_kind = "autocast" if master == "bf16" else "autocast_f32"
        self.attn_mode = "bf16" if precision == "bf16" else gemm

        def take(name):
            if name not in sd:
                raise KeyError(f"weights: missing tensor {name}")
            return sd.pop(name)

        def lin(prefix, kind):
            return Linear(take(prefix + ".weight"), take(prefix + ".bias"), kind)

        def f32(name):
            return take(name).float().contiguous()

        pw = take("patch_embedding.weight")  # [dim, in_dim, pt, ph, pw]
        self.in_dim = pw.shape[1]
        self.patch_embed = Linear(pw.reshape(pw.shape[0], -1), take("patch_embedding.bias"),
                                  low_kind)
        self.text0 = lin("text_embedding.0", low_kind)
        self.text2 = lin("text_embedding.2", low_kind)
        self.time0 = lin("time_embedding.0", f32_kind)
        self.time2 = lin("time_embedding.2", f32_kind)
        self.time_proj = lin("time_projection.1", f32_kind)
        self.blocks = []
        for i in range(c["num_layers"]):
            p = f"blocks.{i}."
            blk = {
                "mod": f32(p + "modulation").reshape(6, self.dim),
                "norm3_w": f32(p + "norm3.weight"),
                "norm3_b": f32(p + "norm3.bias"),
            }
            for a in ("self_attn", "cross_attn"):
                for n in ("q", "k", "v", "o"):
                    blk[f"{a}.{n}"] = lin(p + f"{a}.{n}", low_kind)
                blk[f"{a}.norm_q"] = f32(p + f"{a}.norm_q.weight")
                blk[f"{a}.norm_k"] = f32(p + f"{a}.norm_k.weight")
            blk["ffn0"] = lin(p + "ffn.0", low_kind)
            blk["ffn2"] = lin(p + "ffn.2", low_kind)
            self.blocks.append(blk)
            _release_free_heap()
        self.head = lin("head.head", f32_kind)
        self.head_mod = f32("head.modulation").reshape(2, self.dim)
        if sd:
            raise ValueError(f"weights: unexpected tensors, e.g. {sorted(sd)[:5]}")
        self.rope = rope_tables(self.dim // self.heads)
        _release_free_heap()

    # -- pieces ------------------------------------------------------------------------------

    def _patchify(self, x):
        """[C, F, H, W] -> tokens [L, C*pt*ph*pw] (c, pt, ph, pw order = conv weight order)."""
        C, Fr, Hh, Ww = x.shape
        pt, ph, pw = self.patch
        if Fr % pt or Hh % ph or Ww % pw:
            raise ValueError(f"latent {list(x.shape)} not divisible by patch {self.patch}")
        g = (Fr // pt, Hh // ph, Ww // pw)
        u = x.reshape(C, g[0], pt, g[1], ph, g[2], pw).permute(1, 3, 5, 0, 2, 4, 6)
        return u.reshape(g[0] * g[1] * g[2], C * pt * ph * pw), g

    def _unpatchify(self, u, g):
        pt, ph, pw = self.patch
        c = self.out_dim
        u = u.reshape(g[0], g[1], g[2], pt, ph, pw, c).permute(6, 0, 3, 1, 4, 2, 5)
        return u.reshape(c, g[0] * pt, g[1] * ph, g[2] * pw)

    def _self_attn(self, blk, h, freqs):
        q = rms_norm(blk["self_attn.q"](h), blk["self_attn.norm_q"], self.eps)
        k = rms_norm(blk["self_attn.k"](h), blk["self_attn.norm_k"], self.eps)
        v = blk["self_attn.v"](h)
        q = rope_apply(q, freqs, self.heads)
        k = rope_apply(k, freqs, self.heads)
        v = v.reshape(v.shape[0], self.heads, -1)
        return blk["self_attn.o"](attention(q, k, v, self.attn_mode))

    def _cross_attn(self, blk, h, ctx):
        q = rms_norm(blk["cross_attn.q"](h), blk["cross_attn.norm_q"], self.eps)
        k = rms_norm(blk["cross_attn.k"](ctx), blk["cross_attn.norm_k"], self.eps)
        v = blk["cross_attn.v"](ctx)
        H = self.heads
        o = attention(q.reshape(q.shape[0], H, -1), k.reshape(k.shape[0], H, -1),
                      v.reshape(v.shape[0], H, -1), self.attn_mode)
        return blk["cross_attn.o"](o)

    def _block(self, blk, x, e0, freqs, ctx):
        D, eps = self.dim, self.eps
        m = blk["mod"] + e0  # [6, dim] f32
        shift_sa, scale_sa, gate_sa, shift_ff, scale_ff, gate_ff = m.unbind(0)
        h = F.layer_norm(x, (D,), eps=eps) * (1 + scale_sa) + shift_sa
        x = x + self._self_attn(blk, h, freqs).float() * gate_sa
        h = F.layer_norm(x, (D,), blk["norm3_w"], blk["norm3_b"], eps)
        x = x + self._cross_attn(blk, h, ctx).float()
        h = F.layer_norm(x, (D,), eps=eps) * (1 + scale_ff) + shift_ff
        y = blk["ffn2"](F.gelu(blk["ffn0"](h), approximate="tanh"))
        return x + y.float() * gate_ff

    # -- forward -------------------------------------------------------------------------------

    def forward(self, x, t, context, taps=None):
        """x [in_dim, F, H, W] f32; t scalar tensor [1]; context [Lc, text_dim] (unpadded).

        Returns the velocity [out_dim, F, H, W] f32. `taps` (a dict) receives intermediates
        named like the fixture io file.
        """
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16,
                                             enabled=self.precision == "bf16"):
            return self._forward(x, t, context, taps)

    def _forward(self, x, t, context, taps):
        tok, g = self._patchify(x.float())
        x = self.patch_embed(tok).float()  # [L, dim]
        freqs = rope_freqs(self.rope, g)
        with _no_autocast():
            e = self.time2(F.silu(self.time0(sinusoid_f64(self.freq_dim, t.reshape(-1)))))
            e0 = self.time_proj(F.silu(e)).reshape(6, self.dim)  # [6, dim]
        e, e0 = e.float(), e0.float()
        Lc = context.shape[0]
        if Lc > self.text_len:
            raise ValueError(f"context has {Lc} tokens, more than text_len {self.text_len}")
        ctx = torch.cat([context.float(), context.new_zeros(self.text_len - Lc, context.shape[1])
                         .float()])
        ctx = self.text2(F.gelu(self.text0(ctx), approximate="tanh"))  # [text_len, dim]
        if taps is not None:
            taps["patch_tokens"], taps["e"], taps["e0"] = x, e, e0
            taps["context_emb"] = ctx.float()
        for i, blk in enumerate(self.blocks):
            x = self._block(blk, x, e0, freqs, ctx)
            if taps is not None:
                taps[f"block{i}.out"] = x
        with _no_autocast():
            m = self.head_mod + e  # [2, dim]
            h = F.layer_norm(x, (self.dim,), eps=self.eps) * (1 + m[1]) + m[0]
            u = self.head(h).float()  # [L, out_dim*pt*ph*pw]
        if taps is not None:
            taps["head_out"] = u
        return self._unpatchify(u, g)


def load_model(path, precision="fp32", gemm="mkldnn", master="bf16"):
    sd, meta = load_safetensors(path)
    if "config" not in meta:
        raise ValueError(f"{path}: no __metadata__['config']")
    cfg = json.loads(meta["config"])
    return WanDiT(sd, cfg, precision, gemm, master)


# --------------------------------------------------------------------------------------------
# Fixture check
# --------------------------------------------------------------------------------------------


def check_fixtures(d, gemm, threads, verbose):
    torch.set_num_threads(threads)
    wpath = os.path.join(d, "dit_t2v_tiny.weights.safetensors")
    io, _ = load_safetensors(os.path.join(d, "dit_t2v_tiny.io.safetensors"))
    model = load_model(wpath, "fp32", gemm)
    worst = 0.0
    for k in range(8):
        pre = f"call{k}."
        if pre + "t" not in io:
            break
        taps = {}
        out = model.forward(io["x"], io[pre + "t"], io["context"], taps)
        err = (out - io[pre + "out"]).abs().max().item()
        ref_max = io[pre + "out"].abs().max().item()
        worst = max(worst, err)
        print(f"call{k}: t={io[pre + 't'].item():g} out max abs err {err:.3e} "
              f"(max |ref| {ref_max:.3f})")
        if verbose:
            for name in ("patch_tokens", "e", "e0", "context_emb", "block0.out", "block1.out",
                         "head_out"):
                if pre + name in io and name in taps:
                    ref = io[pre + name].reshape(taps[name].shape)
                    print(f"    {name:14s} {(taps[name] - ref).abs().max().item():.3e}")
    # The BF16 copy of the weights, upcast to f32, must reproduce call<k>.out_bf16w (checks the
    # BF16 read path).
    bpath = os.path.join(d, "dit_t2v_tiny.bf16.safetensors")
    if os.path.exists(bpath) and "call0.out_bf16w" in io:
        model = load_model(bpath, "fp32", gemm)
        for k in range(8):
            pre = f"call{k}."
            if pre + "out_bf16w" not in io:
                break
            out = model.forward(io["x"], io[pre + "t"], io["context"])
            err = (out - io[pre + "out_bf16w"]).abs().max().item()
            worst = max(worst, err)
            print(f"call{k}: bf16 weights file, fp32 math: out_bf16w max abs err {err:.3e}")
    ok = worst <= 1e-4
    print(f"{'PASS' if ok else 'FAIL'}: worst max abs err {worst:.3e} (limit 1e-4), gemm={gemm}")
    # Information only: the bf16 autocast mode on the f32 weights (expected ~1e-2, like the
    # official bf16 pipeline vs the f32 reference).
    model = load_model(wpath, "bf16", gemm)
    for k in range(8):
        pre = f"call{k}."
        if pre + "t" not in io:
            break
        out = model.forward(io["x"], io[pre + "t"], io["context"])
        err = (out - io[pre + "out"]).abs().max().item()
        print(f"call{k}: (info) bf16 autocast mode vs f32 out: max abs err {err:.3e}")
    return 0 if ok else 1


# --------------------------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------------------------


def parse_size(s):
    w, h = s.lower().split("x")
    return int(w), int(h)


def latent_shape(in_dim, frames, width, height):
    """Wan 2.1 VAE: 4x temporal (first frame alone), 8x spatial compression."""
    if (frames - 1) % 4:
        raise ValueError(f"--frames must be 4k+1, got {frames}")
    if width % 16 or height % 16:
        raise ValueError(f"--size must be multiples of 16, got {width}x{height}")
    return [in_dim, (frames - 1) // 4 + 1, height // 8, width // 8]


def make_inputs(in_dim, text_dim, frames, width, height, context_tokens, x_seed=1, ctx_seed=4):
    """Benchmark inputs from torch's CPU generator (vidax has a bit-exact copy of it):
    x = randn(latent, seed x_seed), context = randn([context_tokens, text_dim], seed ctx_seed).
    The default seeds are the ones `vidax bench dit` uses."""
    shape = latent_shape(in_dim, frames, width, height)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(x_seed))
    ctx = torch.randn(context_tokens, text_dim, generator=torch.Generator().manual_seed(ctx_seed))
    return x, ctx


def _proc_status_bytes(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes():
    v = _proc_status_bytes("VmHWM")
    if v is None:
        import resource
        v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return v


def bench(a):
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    width, height = parse_size(a.size)
    t0 = time.perf_counter()
    model = load_model(a.weights, a.precision, a.gemm, a.master_weights)
    load_s = time.perf_counter() - t0
    cfg = model.cfg
    context_tokens = min(a.context_tokens, cfg["text_len"])  # tiny configs have text_len 16
    x, ctx = make_inputs(model.in_dim, cfg["text_dim"], a.frames, width, height,
                         context_tokens, a.x_seed, a.context_seed)
    t = torch.tensor([float(a.t)])
    tokens = (x.shape[1] // model.patch[0]) * (x.shape[2] // model.patch[1]) * \
             (x.shape[3] // model.patch[2])
    rss_after_load = _proc_status_bytes("VmRSS")
    times, cpu_times = [], []
    out = None
    for i in range(a.warmup + a.iters):
        s, c = time.perf_counter(), time.process_time()
        out = model.forward(x, t, ctx)
        dt, dc = time.perf_counter() - s, time.process_time() - c
        if i >= a.warmup:
            times.append(dt)
            cpu_times.append(dc)
        if not a.json:
            print(f"  forward {i} ({'warm-up' if i < a.warmup else 'timed'}): {dt:.3f} s",
                  file=sys.stderr, flush=True)
    res = {
        "impl": "torch-eager",
        "torch_version": torch.__version__,
        "precision": a.precision,
        "gemm": model.gemm,
        "threads": torch.get_num_threads(),
        "frames": a.frames,
        "size": f"{width}x{height}",
        "latent_shape": list(x.shape),
        "context_tokens": context_tokens,
        "x_seed": a.x_seed,
        "context_seed": a.context_seed,
        "t": a.t,
        "tokens": tokens,
        "warmup": a.warmup,
        "iters": a.iters,
        "load_seconds": load_s,
        "seconds_all": times,
        "seconds_per_forward": sum(times) / len(times) if times else None,
        "seconds_min": min(times) if times else None,
        # CPU seconds of the whole process per timed forward (all threads): on a shared
        # machine, cpu/threads close to the wall time means the run was not starved.
        "cpu_seconds_per_forward": sum(cpu_times) / len(cpu_times) if cpu_times else None,
        "rss_after_load_bytes": rss_after_load,
        "peak_rss_bytes": peak_rss_bytes(),
        "out_finite": bool(torch.isfinite(out).all()) if out is not None else None,
        "out_std": float(out.std()) if out is not None else None,
    }
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from compare_dit import dit_flops
        res["flops"] = dit_flops(cfg, tokens)
        if res["seconds_per_forward"]:
            res["gflops_per_second"] = res["flops"] / res["seconds_per_forward"] / 1e9
    except ImportError:
        pass
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:20s} {v}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check-fixtures", metavar="DIR",
                   help="run fp32 on DIR/dit_t2v_tiny.* and compare call<k>.out")
    p.add_argument("--bench", action="store_true", help="time forwards on --weights")
    p.add_argument("--weights", help="safetensors weights file (official names)")
    p.add_argument("--frames", type=int, default=17, help="video frames (4k+1)")
    p.add_argument("--size", default="416x240", help="video WIDTHxHEIGHT (multiples of 16)")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--gemm", choices=["mkldnn", "native"], default="mkldnn",
                   help="backend for float32 GEMMs (see module doc)")
    p.add_argument("--master-weights", choices=["bf16", "f32"], default="bf16",
                   help="bf16 mode: hold the linear weights in bf16, cast once at load (default), "
                        "or in f32 and let autocast cast them on every call, as the official "
                        "pipeline does")
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--context-tokens", type=int, default=77,
                   help="unpadded text context length, capped at text_len (the model "
                        "zero-pads it to text_len)")
    p.add_argument("--t", type=float, default=500.0, help="timestep")
    p.add_argument("--x-seed", type=int, default=1, help="latent noise seed")
    p.add_argument("--context-seed", type=int, default=4, help="text context seed")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    if a.check_fixtures:
        return check_fixtures(a.check_fixtures, a.gemm, a.threads, a.verbose)
    if a.bench:
        if not a.weights:
            p.error("--bench needs --weights (make one with make_random_wan_weights.py)")
        return bench(a)
    p.error("choose --check-fixtures DIR or --bench")


if __name__ == "__main__":
    sys.exit(main())
