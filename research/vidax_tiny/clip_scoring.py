"""Held-out synthetic clips and their scoring by the prompt-adherence analyzer (`score_clip`,
built by score.sh), shared by vae_roundtrip.py and finish_probe.py."""
import subprocess

import numpy as np

from common import CONFIG
from dataset import SynthDataset

ATTRS = ["color", "shape", "motion", "background", "count", "overall"]


def synth_clips(vidax, out, count, seed, layout):
    """`vidax synth` clips seed .. seed + count - 1 at the training size into `out`."""
    subprocess.run([vidax, "--threads", "1", "synth", "--out", out, "--count", str(count),
                    "--seed", str(seed), "--size", f"{CONFIG['size']}x{CONFIG['size']}",
                    "--frames", str(CONFIG["frames"]), "--layout", layout],
                   check=True, stdout=subprocess.DEVNULL)
    return SynthDataset(out)


def score_video(score_clip, video, caption, scratch):
    """video: torch [1, 3, F, H, W] in [-1, 1] -> ({attribute: 0 or 1}, score_clip's line); the
    frames go through `scratch` as U8 [F, H, W, 3]."""
    _, _, _, h, w = video.shape
    u8 = ((video[0].permute(1, 2, 3, 0).numpy() + 1) * 127.5 + 0.5).clip(0, 255).astype(np.uint8)
    u8.tofile(scratch)
    r = subprocess.run([score_clip, scratch, str(w), str(h), caption],
                       capture_output=True, text=True, check=True)
    words = r.stdout.split()
    return {a: int(words[words.index(a) + 1]) for a in ATTRS}, r.stdout.strip()


def found_fills(line):
    """score_clip's line -> [(shape, fill)] of the objects it found ("fills: circle 0.781 ...")."""
    _, _, tail = line.partition("fills:")
    words = tail.split()
    return [(words[i], float(words[i + 1])) for i in range(0, len(words) - 1, 2)]


def tally_text(totals, n):
    return ", ".join(f"{a} {totals[a]}/{n}" for a in ATTRS)
