#!/usr/bin/python3
"""Writes the tiny real torch.save checkpoints under tests/data/pth/ that tests/io read back.

Run once with a Python that has PyTorch (CI does not need it; the files are committed):
    /usr/bin/python3 tools/make_pth_test_files.py tests/data/pth

Every value is a simple formula of the element index that is exact in its dtype, so the C++
tests recompute the expected values instead of reading a second file:
    f32_views.pth   base[4,6] = 0.5 * i - 3 (F32) and views of it sharing its storage: a slice
                    with a storage offset, a transpose, a stride-0 expand of a row; plus a
                    scalar, an empty tensor and an int64 vector (i).
    half_types.pth  bf16[10] = 0.25 * i - 1, f16[2,5] = 0.125 * i - 0.5, int32[3] = i - 1,
                    saved through a file object (archive folder "archive/").
    parameters.pth  nn.Linear(3, 2).state_dict(keep_vars=True): Parameters (weight = 0.1 * i,
                    bias = -i), pickled with _rebuild_parameter and the OrderedDict's _metadata.
    nested.pth      a training checkpoint's shape (Self-Forcing's self_forcing_dmd.pt):
                    {"generator_ema": {"model.blocks.0.w": f32[2,3] = i, "model.head.b":
                    bf16[2] = [1.5, -2]}, "critic": {"inner": {"x": int64[1] = 7}}, "step": 5}.
"""
import collections
import io
import os
import sys

import torch


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)

    base = (torch.arange(24, dtype=torch.float32) * 0.5 - 3).reshape(4, 6)
    sd = collections.OrderedDict()
    sd["base"] = base
    sd["slice"] = base[1:3, 2:5]          # storage offset 8, strides (6, 1)
    sd["transposed"] = base.t()           # strides (1, 6)
    sd["row_expanded"] = base[2].expand(3, 6)  # strides (0, 1), storage offset 12
    sd["scalar"] = torch.tensor(1.25)
    sd["empty"] = torch.zeros(0, 3)
    sd["long"] = torch.arange(5, dtype=torch.int64)
    torch.save(sd, os.path.join(out_dir, "f32_views.pth"))

    sd = collections.OrderedDict()
    sd["bf16"] = (torch.arange(10, dtype=torch.float32) * 0.25 - 1).to(torch.bfloat16)
    sd["f16"] = (torch.arange(10, dtype=torch.float32) * 0.125 - 0.5).to(torch.float16).reshape(2, 5)
    sd["int32"] = torch.arange(3, dtype=torch.int32) - 1
    buf = io.BytesIO()  # a file object: torch names the archive folder "archive"
    torch.save(sd, buf)
    with open(os.path.join(out_dir, "half_types.pth"), "wb") as f:
        f.write(buf.getvalue())

    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.1)
        lin.bias.copy_(-torch.arange(2, dtype=torch.float32))
    torch.save(lin.state_dict(keep_vars=True), os.path.join(out_dir, "parameters.pth"))

    nested = {
        "generator_ema": collections.OrderedDict([
            ("model.blocks.0.w", torch.arange(6, dtype=torch.float32).reshape(2, 3)),
            ("model.head.b", torch.tensor([1.5, -2.0], dtype=torch.bfloat16)),
        ]),
        "critic": {"inner": {"x": torch.tensor([7], dtype=torch.int64)}},
        "step": 5,
    }
    torch.save(nested, os.path.join(out_dir, "nested.pth"))
    print("wrote", sorted(os.listdir(out_dir)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/pth")
