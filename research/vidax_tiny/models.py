"""PyTorch modules of the vidax-tiny family, written for training on the CPU.

The three models follow the official Wan 2.1 architectures (`wan/modules/t5.py` T5Encoder,
`wan/modules/vae.py` WanVAE_, `wan/modules/model.py` WanModel) and use the official parameter
names, so `state_dict()` is exactly what vidax's loaders read from `models_t5_umt5-xxl-enc-bf16.pth`,
`Wan2.1_VAE.pth` and `diffusion_pytorch_model.safetensors`.

Differences from the official code are in how things are evaluated, not in what is computed:
- the VAE runs whole clips at once (no per-chunk feature cache). The causal convs with the
  official cache are exactly a causal conv over the whole clip; the temporal down/upsamplers are
  written in their whole-clip form (see Resample.forward), so a trained VAE decodes the same in
  vidax's chunked decoder;
- RoPE uses a float64 real rotation instead of complex128 (the same products and sums);
- attention is a plain softmax(q k^T / sqrt(d)) v (torch 1.13 has no fused attention).
"""
import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# umT5 encoder (wan/modules/t5.py T5Encoder with shared_pos=False: per-layer position bias)


def t5_relative_bucket(lq, lk, num_buckets=32, max_dist=128):
    """Bidirectional T5 buckets [lq, lk] (relative position k - q)."""
    rel = torch.arange(lk).unsqueeze(0) - torch.arange(lq).unsqueeze(1)
    half = num_buckets // 2
    buckets = (rel > 0).long() * half
    rel = rel.abs()
    max_exact = half // 2
    # log(0) on the diagonal is discarded by the where below (as in the official code).
    large = max_exact + (torch.log(rel.float().clamp(min=1) / max_exact) /
                         math.log(max_dist / max_exact) * (half - max_exact)).long()
    large = torch.clamp(large, max=half - 1)
    return buckets + torch.where(rel < max_exact, rel, large)


class T5Norm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x * torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * x


class T5Attention(nn.Module):
    def __init__(self, dim, dim_attn, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim_attn // num_heads
        self.q = nn.Linear(dim, dim_attn, bias=False)
        self.k = nn.Linear(dim, dim_attn, bias=False)
        self.v = nn.Linear(dim, dim_attn, bias=False)
        self.o = nn.Linear(dim_attn, dim, bias=False)

    def forward(self, x, mask, pos_bias):
        b, n, d = x.size(0), self.num_heads, self.head_dim
        q = self.q(x).view(b, -1, n, d)
        k = self.k(x).view(b, -1, n, d)
        v = self.v(x).view(b, -1, n, d)
        attn = torch.einsum("binc,bjnc->bnij", q, k) + pos_bias  # [b, heads, L, L], T5: no scale
        attn = attn.masked_fill(mask.view(b, 1, 1, -1) == 0, torch.finfo(x.dtype).min)
        attn = F.softmax(attn.float(), dim=-1)
        x = torch.einsum("bnij,bjnc->binc", attn, v).reshape(b, -1, n * d)
        return self.o(x)


class T5FeedForward(nn.Module):
    def __init__(self, dim, dim_ffn):
        super().__init__()
        self.gate = nn.Sequential(nn.Linear(dim, dim_ffn, bias=False), nn.GELU(approximate="tanh"))
        self.fc1 = nn.Linear(dim, dim_ffn, bias=False)
        self.fc2 = nn.Linear(dim_ffn, dim, bias=False)

    def forward(self, x):
        return self.fc2(self.fc1(x) * self.gate(x))


class T5RelativeEmbedding(nn.Module):
    def __init__(self, num_buckets, num_heads):
        super().__init__()
        self.num_buckets = num_buckets
        self.embedding = nn.Embedding(num_buckets, num_heads)

    def forward(self, lq, lk):
        e = self.embedding(t5_relative_bucket(lq, lk, self.num_buckets))  # [lq, lk, heads]
        return e.permute(2, 0, 1).unsqueeze(0)


class T5Block(nn.Module):
    def __init__(self, dim, dim_attn, dim_ffn, num_heads, num_buckets):
        super().__init__()
        self.norm1 = T5Norm(dim)
        self.attn = T5Attention(dim, dim_attn, num_heads)
        self.norm2 = T5Norm(dim)
        self.ffn = T5FeedForward(dim, dim_ffn)
        self.pos_embedding = T5RelativeEmbedding(num_buckets, num_heads)

    def forward(self, x, mask):
        e = self.pos_embedding(x.size(1), x.size(1))
        x = x + self.attn(self.norm1(x), mask, e)
        return x + self.ffn(self.norm2(x))


class T5Encoder(nn.Module):
    def __init__(self, vocab, dim, dim_attn, dim_ffn, num_heads, num_layers, num_buckets=32):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(
            [T5Block(dim, dim_attn, dim_ffn, num_heads, num_buckets) for _ in range(num_layers)])
        self.norm = T5Norm(dim)

    def forward(self, ids, mask):
        x = self.token_embedding(ids)  # [b, L, dim]
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x)

    def init_fixed_random(self, generator):
        """The official init_weights scales, drawn from `generator`, rounded to bf16 (the file
        stores bf16, so the f32 model used for training is exactly the exported one)."""
        dim = self.token_embedding.weight.shape[1]
        for name, p in self.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
                w = torch.ones_like(p)
            else:
                if name == "token_embedding.weight":
                    std = 1.0
                elif name.endswith("attn.q.weight"):
                    std = (dim * p.shape[0]) ** -0.5
                elif name.endswith("attn.o.weight"):
                    std = p.shape[1] ** -0.5
                elif name.endswith("fc2.weight"):
                    std = p.shape[1] ** -0.5
                elif "pos_embedding" in name:
                    std = (2 * p.shape[0]) ** -0.5
                else:  # k, v, gate, fc1
                    std = dim ** -0.5
                w = torch.randn(p.shape, generator=generator) * std
            with torch.no_grad():
                p.copy_(w.to(torch.bfloat16).float())


# ----------------------------------------------------------------------------------------------
# Wan 2.1 VAE (wan/modules/vae.py), whole-clip evaluation


class CausalConv3d(nn.Conv3d):
    """Conv3d padded 2*pt frames in front only (causal), spatial padding on both sides."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0):
        super().__init__(cin, cout, kernel, stride=stride, padding=0)
        p = (padding, padding, padding) if isinstance(padding, int) else padding
        self.causal_pad = (p[2], p[2], p[1], p[1], 2 * p[0], 0)

    def forward(self, x):
        return super().forward(F.pad(x, self.causal_pad))


class RMSNormC(nn.Module):
    """Channel-first RMS norm: F.normalize over channels * sqrt(dim) * gamma."""

    def __init__(self, dim, images=False):
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones((dim, 1, 1) if images else (dim, 1, 1, 1)))

    def forward(self, x):
        return F.normalize(x, dim=1) * self.scale * self.gamma


def _frames_2d(fn, x):
    """Applies a 2-D module to every frame of [b, c, t, h, w]."""
    b, c, t, h, w = x.shape
    y = fn(x.transpose(1, 2).reshape(b * t, c, h, w))
    return y.reshape(b, t, y.shape[1], y.shape[2], y.shape[3]).transpose(1, 2)


class Resample(nn.Module):
    def __init__(self, dim, mode):
        super().__init__()
        self.mode = mode
        if mode.startswith("up"):
            self.resample = nn.Sequential(nn.Upsample(scale_factor=(2.0, 2.0), mode="nearest"),
                                          nn.Conv2d(dim, dim // 2, 3, padding=1))
        else:
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)),
                                          nn.Conv2d(dim, dim, 3, stride=(2, 2)))
        if mode == "upsample3d":
            self.time_conv = CausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode == "downsample3d":
            self.time_conv = CausalConv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1), padding=(0, 0, 0))

    def forward(self, x):
        if self.mode == "upsample3d" and x.shape[2] > 1:
            # Official cache: frame 0 ('Rep') skips time_conv; later frames get a causal conv
            # over frames 1.. alone (zero history), each giving two frames.
            first, rest = x[:, :, :1], x[:, :, 1:]
            b, c, t, h, w = rest.shape
            y = self.time_conv(rest).reshape(b, 2, c, t, h, w)
            y = torch.stack((y[:, 0], y[:, 1]), 3).reshape(b, c, 2 * t, h, w)
            x = torch.cat([first, y], 2)
        x = _frames_2d(self.resample, x)
        if self.mode == "downsample3d" and x.shape[2] > 1:
            # Official cache: frame 0 passes; every later chunk is prefixed with the previous
            # chunk's last frame, i.e. a stride-2 conv over the whole clip from frame 0.
            x = torch.cat([x[:, :, :1], self.time_conv(x)], 2)
        return x


class ResidualBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.residual = nn.Sequential(RMSNormC(cin), nn.SiLU(), CausalConv3d(cin, cout, 3, padding=1),
                                      RMSNormC(cout), nn.SiLU(), nn.Dropout(0.0),
                                      CausalConv3d(cout, cout, 3, padding=1))
        self.shortcut = CausalConv3d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        return self.residual(x) + self.shortcut(x)


class AttentionBlock(nn.Module):
    """Single-head self-attention over the pixels of each frame."""

    def __init__(self, dim):
        super().__init__()
        self.norm = RMSNormC(dim, images=True)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)
        nn.init.zeros_(self.proj.weight)

    def _frame(self, x):  # [n, c, h, w]
        n, c, h, w = x.shape
        q, k, v = self.to_qkv(self.norm(x)).reshape(n, c * 3, h * w).transpose(1, 2).chunk(3, -1)
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(c), dim=-1)  # [n, hw, hw]
        y = (a @ v).transpose(1, 2).reshape(n, c, h, w)
        return self.proj(y)

    def forward(self, x):
        return x + _frames_2d(self._frame, x)


class Encoder3d(nn.Module):
    def __init__(self, dim, z_dim, dim_mult, num_res_blocks, temporal_downsample):
        super().__init__()
        dims = [dim * u for u in [1] + dim_mult]
        self.conv1 = CausalConv3d(3, dims[0], 3, padding=1)
        blocks = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(num_res_blocks):
                blocks.append(ResidualBlock(cin, cout))
                cin = cout
            if i != len(dim_mult) - 1:
                blocks.append(Resample(cout, "downsample3d" if temporal_downsample[i] else "downsample2d"))
        self.downsamples = nn.Sequential(*blocks)
        self.middle = nn.Sequential(ResidualBlock(cout, cout), AttentionBlock(cout), ResidualBlock(cout, cout))
        self.head = nn.Sequential(RMSNormC(cout), nn.SiLU(), CausalConv3d(cout, z_dim, 3, padding=1))

    def forward(self, x):
        return self.head(self.middle(self.downsamples(self.conv1(x))))


class Decoder3d(nn.Module):
    def __init__(self, dim, z_dim, dim_mult, num_res_blocks, temporal_upsample):
        super().__init__()
        dims = [dim * u for u in [dim_mult[-1]] + dim_mult[::-1]]
        self.conv1 = CausalConv3d(z_dim, dims[0], 3, padding=1)
        self.middle = nn.Sequential(ResidualBlock(dims[0], dims[0]), AttentionBlock(dims[0]),
                                    ResidualBlock(dims[0], dims[0]))
        blocks = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            if i in (1, 2, 3):
                cin = cin // 2
            for _ in range(num_res_blocks + 1):
                blocks.append(ResidualBlock(cin, cout))
                cin = cout
            if i != len(dim_mult) - 1:
                blocks.append(Resample(cout, "upsample3d" if temporal_upsample[i] else "upsample2d"))
        self.upsamples = nn.Sequential(*blocks)
        self.head = nn.Sequential(RMSNormC(cout), nn.SiLU(), CausalConv3d(cout, 3, 3, padding=1))

    def forward(self, z):
        return self.head(self.upsamples(self.middle(self.conv1(z))))


class WanVAE(nn.Module):
    """WanVAE_: encode gives raw mu (no latent statistics); decode takes raw z."""

    def __init__(self, dim=16, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=1,
                 temporal_downsample=(False, True, True)):
        super().__init__()
        dim_mult, td = list(dim_mult), list(temporal_downsample)
        self.z_dim = z_dim
        self.encoder = Encoder3d(dim, z_dim * 2, dim_mult, num_res_blocks, td)
        self.conv1 = CausalConv3d(z_dim * 2, z_dim * 2, 1)
        self.conv2 = CausalConv3d(z_dim, z_dim, 1)
        self.decoder = Decoder3d(dim, z_dim, dim_mult, num_res_blocks, td[::-1])

    def encode_mu(self, x):  # x [b, 3, 1+4k, H, W] -> mu [b, z, 1+k, H/8, W/8]
        return self.conv1(self.encoder(x))[:, :self.z_dim]

    def decode(self, z):
        return self.decoder(self.conv2(z))



def init_vae_for_training(vae):
    """Training initialisation (the exported layout is unchanged): He-normal convolution weights,
    zero biases and a zero last convolution in every residual branch, so that each residual block
    starts as its shortcut. With PyTorch's default init (kaiming-uniform with a = sqrt(5), random
    biases) this 8-channel VAE's latent barely depends on its input (its spread across samples is
    ~5% of its overall spread; the biases dominate after every per-pixel RMS norm), and training
    sat on a constant-grey plateau for hundreds of steps (docs/vidax-tiny.md). Draws from the
    global torch generator (seeded by the caller)."""
    for m in vae.modules():
        if isinstance(m, (nn.Conv2d, nn.Conv3d)):
            nn.init.normal_(m.weight, std=(2.0 / m.weight[0].numel()) ** 0.5)
            nn.init.zeros_(m.bias)
    for m in vae.modules():
        if isinstance(m, ResidualBlock):
            nn.init.zeros_(m.residual[-1].weight)
    for m in vae.modules():
        if isinstance(m, AttentionBlock):
            nn.init.zeros_(m.proj.weight)  # identity at init, as the official module

# Official Wan 2.1 latent statistics (wan/modules/vae.py WanVAE.mean / std); vidax normalises
# latents with them whenever it loads a Wan2.1_VAE.pth.
WAN21_MEAN = [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
              0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921]
WAN21_STD = [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
             3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160]


def fold_latent_stats(vae, mean, std):
    """Rewrites conv1 (mu rows) and conv2 so that the raw latent mu' of the returned model equals
    WAN21_MEAN + WAN21_STD * (mu - mean) / std: vidax's normalisation with the official
    statistics, (mu' - WAN21_MEAN) / WAN21_STD, then gives (mu - mean) / std, zero mean and unit
    variance per channel, without any loader change. The decoded video is unchanged."""
    z = vae.z_dim
    m, s = torch.tensor(mean, dtype=torch.float64), torch.tensor(std, dtype=torch.float64)
    om, os_ = torch.tensor(WAN21_MEAN, dtype=torch.float64), torch.tensor(WAN21_STD, dtype=torch.float64)
    a = os_ / s            # mu' = a * mu + c
    c = om - a * m
    with torch.no_grad():
        w1 = vae.conv1.weight.double()  # [2z, 2z, 1, 1, 1]
        b1 = vae.conv1.bias.double()
        w1[:z] = w1[:z] * a.view(z, 1, 1, 1, 1)
        b1[:z] = b1[:z] * a + c
        vae.conv1.weight.copy_(w1.float())
        vae.conv1.bias.copy_(b1.float())
        # conv2(mu) = W mu + b with mu = (mu' - c) / a
        w2 = vae.conv2.weight.double()  # [z, z, 1, 1, 1]
        b2 = vae.conv2.bias.double()
        w2n = w2 / a.view(1, z, 1, 1, 1)
        b2n = b2 - (w2[:, :, 0, 0, 0] @ (c / a))
        vae.conv2.weight.copy_(w2n.float())
        vae.conv2.bias.copy_(b2n.float())


# ----------------------------------------------------------------------------------------------
# Wan 2.1 T2V DiT (wan/modules/model.py WanModel)


def sinusoidal_embedding_1d(dim, position):
    half = dim // 2
    position = position.double()
    sinusoid = torch.outer(position, torch.pow(10000, -torch.arange(half).double().div(half)))
    return torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1).float()


def rope_angles(max_len, dim, theta=10000.0):
    return torch.outer(torch.arange(max_len).double(),
                       1.0 / torch.pow(theta, torch.arange(0, dim, 2).double().div(dim)))


def rope_table(f, h, w, head_dim=128):
    """cos, sin [f*h*w, head_dim/2] float64 for the (frame, row, column) split 44/42/42."""
    d = head_dim
    a_f = rope_angles(1024, d - 4 * (d // 6))[:f]
    a_h = rope_angles(1024, 2 * (d // 6))[:h]
    a_w = rope_angles(1024, 2 * (d // 6))[:w]
    ang = torch.cat([a_f.view(f, 1, 1, -1).expand(f, h, w, -1),
                     a_h.view(1, h, 1, -1).expand(f, h, w, -1),
                     a_w.view(1, 1, w, -1).expand(f, h, w, -1)], dim=-1).reshape(f * h * w, -1)
    return torch.cos(ang), torch.sin(ang)


def rope_apply(x, cos, sin):
    """x [b, L, heads, d]: rotates pairs (x[2i], x[2i+1]) in the table's dtype (float64 as the
    official code; training passes a float32 table for speed), returns float32."""
    b, L, n, d = x.shape
    xd = x.to(cos.dtype).reshape(b, L, n, d // 2, 2)
    re, im = xd[..., 0], xd[..., 1]
    c, s = cos.view(1, L, 1, -1), sin.view(1, L, 1, -1)
    out = torch.stack([re * c - im * s, re * s + im * c], dim=-1)
    return out.reshape(b, L, n, d).float()


class WanRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


GELU_FORMS = ("tanh", "erf")  # Wan's form first


@contextlib.contextmanager
def gelu_form(model, form):
    """Within the block, the model's GELUs compute `form`: "tanh" (Wan's, what every module here
    is built with) or "erf" (training only, CONFIG dit_train_gelu). Their own forms are restored
    on exit, also on an exception; autograd keeps the form a forward used for its backward."""
    if form not in GELU_FORMS:
        raise ValueError(f"GELU form {form!r}: one of {', '.join(GELU_FORMS)}")
    gelus = [m for m in model.modules() if isinstance(m, nn.GELU)]
    own = [m.approximate for m in gelus]
    for m in gelus:
        m.approximate = "tanh" if form == "tanh" else "none"
    try:
        yield
    finally:
        for m, a in zip(gelus, own):
            m.approximate = a


class WanLayerNorm(nn.LayerNorm):
    def __init__(self, dim, eps=1e-6, elementwise_affine=False):
        super().__init__(dim, eps=eps, elementwise_affine=elementwise_affine)


def attention(q, k, v, bias=None):
    """q [b, Lq, n, d], k/v [b, Lk, n, d] -> [b, Lq, n*d]; bias [b, Lk] added to the logits."""
    b, lq, n, d = q.shape
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    # The scale goes on q ([b, n, Lq, d]), not on the [b, n, Lq, Lk] logits: the same product
    # up to rounding, and a DiT training step spent ~10% of its time scaling the logits.
    logits = (q * d ** -0.5) @ k.transpose(-1, -2)  # [b, n, Lq, Lk]
    if bias is not None:
        logits = logits.float() + bias.view(b, 1, 1, -1)
    a = torch.softmax(logits, dim=-1).to(v.dtype)
    return (a @ v).transpose(1, 2).reshape(b, lq, n * d)


class WanSelfAttention(nn.Module):
    def __init__(self, dim, num_heads, eps=1e-6):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q = WanRMSNorm(dim, eps)
        self.norm_k = WanRMSNorm(dim, eps)

    def forward(self, x, cos, sin):
        b, L = x.shape[:2]
        n, d = self.num_heads, self.head_dim
        q = self.norm_q(self.q(x)).view(b, L, n, d)
        k = self.norm_k(self.k(x)).view(b, L, n, d)
        v = self.v(x).view(b, L, n, d)
        return self.o(attention(rope_apply(q, cos, sin), rope_apply(k, cos, sin), v))


class WanCrossAttention(WanSelfAttention):
    def forward(self, x, context, bias=None):
        b = x.size(0)
        n, d = self.num_heads, self.head_dim
        q = self.norm_q(self.q(x)).view(b, -1, n, d)
        k = self.norm_k(self.k(context)).view(b, -1, n, d)
        v = self.v(context).view(b, -1, n, d)
        return self.o(attention(q, k, v, bias))  # T2V: every text_len row, padding included


class WanAttentionBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, eps=1e-6):
        super().__init__()
        self.norm1 = WanLayerNorm(dim, eps)
        self.self_attn = WanSelfAttention(dim, num_heads, eps)
        self.norm3 = WanLayerNorm(dim, eps, elementwise_affine=True)
        self.cross_attn = WanCrossAttention(dim, num_heads, eps)
        self.norm2 = WanLayerNorm(dim, eps)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, x, e0, context, cos, sin, ctx_bias=None):
        e = (self.modulation + e0).chunk(6, dim=1)  # each [b, 1, dim]
        y = self.self_attn(self.norm1(x) * (1 + e[1]) + e[0], cos, sin)
        x = x + y * e[2]
        x = x + self.cross_attn(self.norm3(x), context, ctx_bias)
        y = self.ffn(self.norm2(x) * (1 + e[4]) + e[3])
        return x + y * e[5]


class Head(nn.Module):
    def __init__(self, dim, out_dim, patch, eps=1e-6):
        super().__init__()
        self.norm = WanLayerNorm(dim, eps)
        self.head = nn.Linear(dim, out_dim * math.prod(patch))
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim ** 0.5)

    def forward(self, x, e):
        m = (self.modulation + e.unsqueeze(1)).chunk(2, dim=1)
        return self.head(self.norm(x) * (1 + m[1]) + m[0])


class WanDiT(nn.Module):
    """Wan 2.1 T2V: x [b, 16, F, H, W] latents, t [b] timesteps (sigma * 1000), context
    [b, Lc, text_dim] T5 outputs, Lc <= text_len (zero padded to text_len, not masked)."""

    def __init__(self, dim=128, ffn_dim=512, num_heads=1, num_layers=4, text_dim=64, freq_dim=256,
                 in_dim=16, out_dim=16, text_len=512, patch=(1, 2, 2), eps=1e-6):
        super().__init__()
        self.cfg = dict(dim=dim, ffn_dim=ffn_dim, num_heads=num_heads, num_layers=num_layers,
                        text_dim=text_dim, freq_dim=freq_dim, in_dim=in_dim, out_dim=out_dim,
                        text_len=text_len, patch_size=list(patch), eps=eps)
        self.patch, self.text_len, self.freq_dim, self.out_dim = patch, text_len, freq_dim, out_dim
        self.patch_embedding = nn.Conv3d(in_dim, dim, kernel_size=patch, stride=patch)
        self.text_embedding = nn.Sequential(nn.Linear(text_dim, dim), nn.GELU(approximate="tanh"),
                                            nn.Linear(dim, dim))
        self.time_embedding = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 6))
        self.blocks = nn.ModuleList([WanAttentionBlock(dim, ffn_dim, num_heads, eps)
                                     for _ in range(num_layers)])
        self.head = Head(dim, out_dim, patch, eps)
        self._init_weights()

    def _init_weights(self):  # WanModel.init_weights
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.xavier_uniform_(self.patch_embedding.weight.flatten(1))
        for m in list(self.text_embedding.modules()) + list(self.time_embedding.modules()):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        nn.init.zeros_(self.head.head.weight)

    def pad_context(self, contexts):
        """list of [Li, text_dim] -> [b, text_len, text_dim] zero padded (official)."""
        return torch.stack([torch.cat([u, u.new_zeros(self.text_len - u.size(0), u.size(1))])
                            for u in contexts])

    def compact_context(self, contexts):
        """Training shortcut, exact in real arithmetic: the text_len - L zero padding rows all
        embed to the same vector, so attending to them equals attending to one such row with
        log(text_len - L) added to its logit. Returns context [b, Lmax + 1, text_dim] and the
        logit bias [b, Lmax + 1] (-inf for the rows a shorter text does not have)."""
        lmax = max(u.size(0) for u in contexts)
        ctx = contexts[0].new_zeros(len(contexts), lmax + 1, contexts[0].size(1))
        bias = torch.full((len(contexts), lmax + 1), float("-inf"))
        for i, u in enumerate(contexts):
            ctx[i, :u.size(0)] = u
            bias[i, :u.size(0)] = 0.0
            bias[i, u.size(0)] = math.log(self.text_len - u.size(0))
        return ctx, bias

    def forward(self, x, t, context, rope=None, ctx_bias=None, tap=None):
        """With tap = k (training only, stills.py's shape probe) also returns the tokens after
        the first k blocks, [b, tokens, dim]."""
        b = x.size(0)
        x = self.patch_embedding(x)  # [b, dim, f, h, w]
        f, h, w = x.shape[2:]
        x = x.flatten(2).transpose(1, 2)  # [b, tokens, dim]
        cos, sin = rope if rope is not None else rope_table(f, h, w, self.blocks[0].self_attn.head_dim)
        e = self.time_embedding(sinusoidal_embedding_1d(self.freq_dim, t))  # [b, dim]
        e0 = self.time_projection(e).unflatten(1, (6, -1))  # [b, 6, dim]
        context = self.text_embedding(context)  # [b, text_len, dim]
        tapped = None
        for k, block in enumerate(self.blocks):
            x = block(x, e0, context, cos, sin, ctx_bias)
            if k + 1 == tap:
                tapped = x
        x = self.head(x, e)  # [b, tokens, out * 4]
        pf, ph, pw = self.patch
        x = x.view(b, f, h, w, pf, ph, pw, self.out_dim)
        x = torch.einsum("bfhwpqrc->bcfphqwr", x)
        x = x.reshape(b, self.out_dim, f * pf, h * ph, w * pw)
        return x if tap is None else (x, tapped)
