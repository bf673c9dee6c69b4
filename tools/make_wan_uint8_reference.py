#!/usr/bin/python3
"""Reference for vidax::to_uint8_rgb: the float -> uint8 rule of the official Wan cache_video.

wan/utils/utils.py (Wan-Video/Wan2.1 @ 9737cba9) does, on the VAE output in float32:
    tensor = tensor.clamp(-1, 1)
    torchvision.utils.make_grid(u, nrow=1, normalize=True, value_range=(-1, 1))
        -> norm_ip: img.clamp_(min=-1, max=1); img.sub_(-1).div_(max(1 - (-1), 1e-5))
    (tensor * 255).type(torch.uint8)
torchvision is not installed here, so the same torch ops are applied directly (make_grid with a
single image returns it unchanged apart from the normalisation). NaN is left out: torch's
float->uint8 cast of NaN is undefined behaviour in C++ (vidax defines NaN -> 0).

Run with Debian's PyTorch (/usr/bin/python3, torch 1.13 CPU):
    /usr/bin/python3 tools/make_wan_uint8_reference.py tests/io/data/wan_uint8_reference.safetensors
Writes F32 `x` [N] and I32 `byte` [N] (safetensors has no U8 in vidax's reader).
"""
import json
import struct
import sys

import numpy as np
import torch


def values():
    out = []
    # Around every byte boundary: v*255 == k exactly at x = 2k/255 - 1; +-4 float32 ulps.
    for k in range(256):
        x = np.float32(2.0 * k / 255.0 - 1.0)
        lo = x
        hi = x
        near = [x]
        for _ in range(4):
            lo = np.nextafter(lo, np.float32(-np.inf))
            hi = np.nextafter(hi, np.float32(np.inf))
            near += [lo, hi]
        out += near
    out += [-1.0, 1.0, 0.0, -0.0, 1e-8, -1e-8, 0.5, -0.5, 1.0000001, -1.0000001, 1.5, -1.5,
            100.0, -100.0, 3.4e38, -3.4e38, np.inf, -np.inf]
    rng = np.random.default_rng(20250301)
    out += list(rng.uniform(-1.2, 1.2, 1000))
    return np.array(out, dtype=np.float32)


def official_bytes(x):
    t = torch.from_numpy(x.copy())
    t = t.clamp(-1, 1)  # cache_video
    t = t.clone()  # make_grid(normalize=True)
    t.clamp_(min=-1, max=1)
    t.sub_(-1).div_(max(1 - (-1), 1e-5))
    return (t * 255).type(torch.uint8).numpy()


def write_safetensors(path, tensors):
    header = {}
    offset = 0
    blobs = []
    for name, (dtype, arr) in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"source": "tools/make_wan_uint8_reference.py"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    x = values()
    b = official_bytes(x).astype(np.int32)
    write_safetensors(sys.argv[1], {"x": ("F32", x), "byte": ("I32", b)})
    print(f"{len(x)} values, bytes {b.min()}..{b.max()}")


if __name__ == "__main__":
    main()
