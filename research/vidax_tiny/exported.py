"""vidax-tiny's three networks rebuilt from an exported folder (models/vidax-tiny layout: the
official Wan file names) with the training code's own modules, weights as stored, computed in
f32. Used by parity.py and finish_probe.py."""
import json
import os

import torch

from common import CONFIG, read_safetensors
from models import T5Encoder, WanDiT, WanVAE


def load_exported(folder):
    """-> (t5, dit, vae), all in eval mode."""
    # T5 from the bf16 .pth (upcast: f32 math on the stored values)
    sd = {k: v.float() for k, v in torch.load(os.path.join(folder, "models_t5_umt5-xxl-enc-bf16.pth")).items()}
    c = CONFIG["t5"]
    t5 = T5Encoder(sd["token_embedding.weight"].shape[0], c["dim"], c["dim_attn"], c["dim_ffn"],
                   c["num_heads"], c["num_layers"], c["num_buckets"])
    t5.load_state_dict(sd)
    # DiT from the safetensors + config.json
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    dit = WanDiT(dim=cfg["dim"], ffn_dim=cfg["ffn_dim"], num_heads=cfg["num_heads"],
                 num_layers=cfg["num_layers"], text_dim=cfg["text_dim"], freq_dim=cfg["freq_dim"],
                 in_dim=cfg["in_dim"], out_dim=cfg["out_dim"], text_len=cfg["text_len"],
                 patch=tuple(cfg["patch_size"]), eps=cfg["eps"])
    dit.load_state_dict({k: v.float() for k, v in
                         read_safetensors(os.path.join(folder, "diffusion_pytorch_model.safetensors")).items()})
    # VAE (its latent statistics folded in: vidax applies the official ones to its raw latent)
    vae = WanVAE(**CONFIG["vae"])
    vae.load_state_dict({k: v.float() for k, v in torch.load(os.path.join(folder, "Wan2.1_VAE.pth")).items()})
    return t5.eval(), dit.eval(), vae.eval()
