#!/usr/bin/env python3
"""Reader for synthetic video datasets written by `vidax synth` (numpy only, no torch).

Format (docs/synthetic-world.md): DIR/manifest.json plus safetensors shards holding
"clips" U8 [n, F, H, W, 3] RGB and "seeds" I64 [n]. The model sees a clip as
float32 [3, F, H, W] with v -> (v - 127.5) / 127.5, exactly as vidax's render() does.

    ds = SynthDataset("data/synth")
    video = ds.video(0)          # float32 [3, F, H, W] in [-1, 1]
    text = ds.caption(0)

Self-test (writes a small dataset with the vidax binary and checks it):
    /usr/bin/python3 research/vidax_tiny/dataset.py --self-test build/release/vidax
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

FORMAT = "vidax-synth"
FORMAT_VERSION = 1
_DTYPES = {"U8": np.uint8, "I64": np.int64, "I32": np.int32, "F32": np.float32}


def read_safetensors(path):
    """name -> numpy array (memory-mapped, read-only) for the dtypes a dataset uses."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dtype = np.dtype(_DTYPES[e["dtype"]])
        count = (end - begin) // dtype.itemsize
        arr = np.memmap(path, dtype=dtype, mode="r", offset=8 + n + begin, shape=(count,))
        out[name] = arr.reshape(e["shape"])
    return out


def fnv1a64(data):
    """FNV-1a 64 of a byte buffer, as in the manifest (pure Python: fine for small clips)."""
    h = 0xCBF29CE484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def to_model(clip):
    """uint8 [F, H, W, 3] -> float32 [3, F, H, W] in [-1, 1]."""
    x = (clip.astype(np.float32) - np.float32(127.5)) / np.float32(127.5)
    return np.ascontiguousarray(x.transpose(3, 0, 1, 2))


class SynthDataset:
    def __init__(self, folder):
        with open(os.path.join(folder, "manifest.json")) as f:
            self.manifest = json.load(f)
        m = self.manifest
        if m.get("format") != FORMAT or m.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{folder}: not a {FORMAT} v{FORMAT_VERSION} dataset")
        g = m["geometry"]
        self.width, self.height, self.frames = g["width"], g["height"], g["frames"]
        self.shards = []
        for s in m["shards"]:
            t = read_safetensors(os.path.join(folder, s["file"]))
            want = (s["count"], self.frames, self.height, self.width, 3)
            if t["clips"].shape != want or t["clips"].dtype != np.uint8:
                raise ValueError(f"{s['file']}: clips {t['clips'].shape}, expected U8 {want}")
            self.shards.append(t)
        self.clips = m["clips"]

    def __len__(self):
        return len(self.clips)

    def caption(self, i):
        return self.clips[i]["caption"]

    def entry(self, i):
        """The manifest entry: seed, caption, background, objects (colour, shape, motion...)."""
        return self.clips[i]

    def clip(self, i):
        """uint8 [F, H, W, 3] RGB (a read-only memory-mapped view)."""
        e = self.clips[i]
        return self.shards[e["shard"]]["clips"][e["row"]]

    def video(self, i):
        return to_model(self.clip(i))

    def verify(self, i):
        """True when clip i's bytes match the manifest checksum."""
        return fnv1a64(self.clip(i)) == int(self.clips[i]["fnv1a64"], 16)


def self_test(binary):
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        common = ["--size", "64x32", "--frames", "5"]
        subprocess.run([binary, "synth", "--out", a, "--count", "5", "--seed", "3",
                        "--shard-size", "2"] + common, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([binary, "synth", "--out", b, "--count", "1", "--seed", "5"] + common,
                       check=True, stdout=subprocess.DEVNULL)
        da, db = SynthDataset(a), SynthDataset(b)
        assert len(da) == 5 and len(db) == 1 and len(da.shards) == 3
        for i in range(len(da)):
            assert da.entry(i)["seed"] == 3 + i
            assert da.clip(i).shape == (5, 32, 64, 3)
            assert da.verify(i), f"clip {i}: checksum differs from the manifest"
        # The same seed from a separate export (other shard layout) is the same clip.
        assert np.array_equal(da.clip(2), db.clip(0))
        assert da.caption(2) == db.caption(0)
        v = da.video(2)
        assert v.shape == (3, 5, 32, 64) and v.dtype == np.float32
        assert v.min() >= -1.0 and v.max() <= 1.0
        assert np.array_equal(np.round(v * 127.5 + 127.5).astype(np.uint8).transpose(1, 2, 3, 0),
                              da.clip(2))
    print("dataset.py self-test passed")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        self_test(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
