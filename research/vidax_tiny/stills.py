#!/usr/bin/python3
"""Can a DiT recipe draw the caption's shapes at all? A fast loop on still images
(docs/vidax-tiny.md, "Stills: can the DiT draw shapes at all?").

Every video run here ends with soft blobs for objects (0-4% on `vidax eval`), and a video run
costs hours. A still (one latent frame, 256 tokens at 256x256) costs a fifth of a clip per
sample, has no motion to get wrong, and is what the video DiT must draw in every frame; the
causal VAE encodes a one-frame clip as it encodes a clip's first frame. So:

    stills.py data WORK [--count 8192] [--seed 5000000]
        `vidax synth --frames 1` scenes in the DiT's layout, encoded by WORK's VAE (vae_path) and
        normalised with WORK/latents.pt's statistics -> WORK/stills.pt; 24 held-out scenes
        (seeds 6,000,000+) -> WORK/stills_heldout.pt
    stills.py labels WORK [--seed 5000000]
        renders WORK/stills.pt's scenes again and adds the shape probe's labels per 4x4-pixel
        cell (dit_probe_cells 4) to a stills.pt written before them, without encoding again
    stills.py train WORK RUN [--score-clip BIN] [--steps 3000] [--every 500] [--batch 16] [--procs N]
        a fresh DiT (CONFIG["dit"], --set dit.dim=256 ... to change it) trained on the stills
        alone, as train.py's dit phase trains (flow matching, shift, object and outline weights
        and their decay, CFG drop, the lr schedule; with dit_probe_weight a training-only
        shape probe on the tokens or their cells, ProbedDiT), resumable; every E steps the held-out
        captions are generated from noise and scored (with dit_ema, the average too) ->
        RUN/stills_ckpt.pt, RUN/stills_loss.csv, RUN/score_STEP_{raw,ema}.txt
    stills.py score WORK [RUN/stills_ckpt.pt [--ema] | --ground-truth] --score-clip BIN
        one checkpoint's score, or the held-out stills' VAE round trips (the ceiling)
    stills.py strip WORK RUN/stills_ckpt.pt --out PNG [--columns 8]
        the first held-out stills' round trips above the checkpoint's generations (raw weights,
        then the average when the run keeps one), as the scoring makes them
    stills.py words WORK RUN/stills_ckpt.pt [--ema] --score-clip BIN
        does the DiT listen to the shape word? Every held-out caption is asked with each shape
        in turn (every object that shape) from the same noise; per asked shape, the shapes the
        analyzer found and their mean bounding-box fill (square ~1, circle ~0.79, triangle ~0.5),
        and for each pair of words how far the word moves the decoded picture (mean |difference|)

Scoring: 20 Euler steps from sigma 1 with CFG 5 (finish_probe.finish), decoded by WORK's VAE,
the frame repeated to a 17-frame still clip and read by `score_clip` (built by score.sh).
Motion cannot be judged on a still; the score counts colour, shape, background and count, and
clips with all four right. WORK needs spiece.model, the VAE and latents.pt (train.py phases
tokenizer, vae[, vae_tune], latents); `--set` must repeat the run's settings as for train.py.
"""
import argparse
import copy
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_parallel  # noqa: E402
import train  # noqa: E402
from clip_scoring import found_fills, score_video  # noqa: E402
from common import CONFIG as C, SHAPES, apply_overrides, encode_texts, tokenize  # noqa: E402
from dataset import SynthDataset  # noqa: E402
from finish_probe import ask_shape, finish  # noqa: E402
from models import WanDiT, rope_table  # noqa: E402

HELD_SEED, HELD_COUNT = 6000000, 24
SCORED = ("color", "shape", "background", "count")


def latent_stats(work):
    """The per-channel mean/std the DiT's latents are normalised with, [1, 16, 1, 1, 1] each."""
    lat = torch.load(os.path.join(work, "latents.pt"))
    return lat["mean"].view(1, -1, 1, 1, 1), lat["std"].view(1, -1, 1, 1, 1)


def encode_stills(args, out, count, seed):
    """Renders `count` one-frame scenes and writes their normalised latents, latent object
    footprints and captions to `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        clips = os.path.join(tmp, "clips")
        subprocess.run([args.vidax, "--threads", "1", "synth", "--out", clips, "--count", str(count),
                        "--seed", str(seed), "--size", f"{C['size']}x{C['size']}", "--frames", "1",
                        "--layout", C["dit_layout"]], check=True, stdout=subprocess.DEVNULL)
        ds = SynthDataset(clips)
        vae = train.encoding_vae(args.work)
        mean, std = latent_stats(args.work)
        palette = ds.manifest["palette"]["objects"]
        zs, feet, labels, cells, t0 = [], [], [], [], time.time()
        for b in range(0, count, 32):
            rows = range(b, min(count, b + 32))
            x = torch.stack([torch.from_numpy(ds.video(i)) for i in rows])  # [n, 3, 1, H, W]
            with torch.no_grad():
                zs.append((vae.encode_mu(x) - mean) / std)  # [n, 16, 1, H/8, W/8]
            feet += [torch.from_numpy(train.latent_footprint(train.object_mask(ds.clip(i)))) for i in rows]
            labels += [torch.from_numpy(token_shapes(ds.clip(i), ds.entry(i), palette)) for i in rows]
            cells += [torch.from_numpy(cell_shapes(ds.clip(i), ds.entry(i), palette)) for i in rows]
            if (b // 32) % 32 == 31:
                train.log(f"stills: {b + len(rows)}/{count} ({time.time() - t0:.0f} s)")
        captions = [ds.caption(i) for i in range(count)]
    train.save_atomic({"z": torch.cat(zs), "foot": torch.stack(feet).float(), "shapes": torch.stack(labels),
                       "cell_shapes": torch.stack(cells), "captions": captions,
                       "layout": C["dit_layout"], "seconds": time.time() - t0}, out)


def token_shapes(clip, entry, palette, patch=16):
    """uint8 [1, H, W, 3] still and its manifest entry -> int64 [H/patch * W/patch], per DiT token
    (patch x patch pixels: a 2x2 patch of latent voxels), row-major: 1 + the SHAPES index of the
    object covering most of its pixels when that is at least a quarter of them, else 0. Object
    pixels (train.object_mask) belong to the object of the nearest palette colour."""
    mask = train.object_mask(clip)[0]  # [H, W]
    rgb = np.array([palette[o["color"]] for o in entry["objects"]], np.int16)  # [objects, 3]
    nearest = np.abs(clip[0].astype(np.int16)[:, :, None] - rgb).sum(-1).argmin(-1)  # [H, W]
    h, w = mask.shape
    counts = np.stack([((nearest == j) & mask).reshape(h // patch, patch, w // patch, patch).sum((1, 3))
                       for j in range(len(rgb))])  # [objects, H/patch, W/patch]
    ids = np.array([1 + SHAPES.index(o["shape"]) for o in entry["objects"]])
    return np.where(counts.max(0) * 4 >= patch * patch, ids[counts.argmax(0)], 0).reshape(-1).astype(np.int64)


def cell_shapes(clip, entry, palette):
    """token_shapes' rule per 4x4-pixel cell -> uint8 [H/4, W/4] (the dit_probe_cells 4 labels)."""
    h, w = clip.shape[1:3]
    return token_shapes(clip, entry, palette, patch=4).reshape(h // 4, w // 4).astype(np.uint8)


def token_cells(grid):
    """uint8 [B, H/4, W/4] cell labels -> int64 [B, L, 16]: each DiT token's (16x16 pixels,
    row-major like the tokens) 4x4 cells, row-major."""
    b, h, w = grid.shape
    g = grid.view(b, h // 4, 4, w // 4, 4).permute(0, 1, 3, 2, 4)  # [B, H/16, W/16, 4, 4]
    return g.reshape(b, (h // 4) * (w // 4), 16).long()


def phase_labels(args):
    """Adds "cell_shapes" to WORK/stills.pt: its scenes rendered again (vidax synth from --seed,
    in chunks), their captions checked against the stored ones so that rows cannot shift."""
    path = os.path.join(args.work, "stills.pt")
    d = load_stills(path)
    count, grids, t0 = len(d["captions"]), [], time.time()
    for b in range(0, count, 1024):
        n = min(1024, count - b)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([args.vidax, "--threads", "1", "synth", "--out", tmp, "--count", str(n),
                            "--seed", str(args.seed + b), "--size", f"{C['size']}x{C['size']}", "--frames", "1",
                            "--layout", C["dit_layout"]], check=True, stdout=subprocess.DEVNULL)
            ds = SynthDataset(tmp)
            palette = ds.manifest["palette"]["objects"]
            for i in range(n):
                if ds.caption(i) != d["captions"][b + i]:
                    sys.exit(f"stills labels: {path} row {b + i} is \"{d['captions'][b + i]}\", seed "
                             f"{args.seed + b + i} renders \"{ds.caption(i)}\": pass the --seed of its `data` run")
                grids.append(torch.from_numpy(cell_shapes(ds.clip(i), ds.entry(i), palette)))
        train.log(f"stills labels: {b + n}/{count} ({time.time() - t0:.0f} s)")
    d["cell_shapes"] = torch.stack(grids)
    train.save_atomic(d, path)


def phase_data(args):
    encode_stills(args, os.path.join(args.work, "stills_heldout.pt"), HELD_COUNT, HELD_SEED)
    encode_stills(args, os.path.join(args.work, "stills.pt"), args.count, args.seed)


def load_stills(path):
    if not os.path.exists(path):
        sys.exit(f"stills: {path} is missing: run `stills.py data WORK` first")
    d = torch.load(path)
    if d["layout"] != C["dit_layout"]:
        sys.exit(f"stills: {path} holds {d['layout']}-layout scenes, dit_layout is {C['dit_layout']}")
    return d


def tally(verdicts):
    """[{attribute: 0/1}] -> {attribute: count} over SCORED plus "all" (every one right)."""
    out = {a: sum(v[a] for v in verdicts) for a in SCORED}
    out["all"] = sum(all(v[a] for a in SCORED) for v in verdicts)
    return out


def score_frames(score_clip, frames, captions):
    """frames: [1, 3, 1, H, W] in [-1, 1] per caption -> (tally, per-still lines: the caption,
    then score_clip's)."""
    verdicts, lines = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for frame, caption in zip(frames, captions):
            v, line = score_video(score_clip, frame.expand(-1, -1, C["frames"], -1, -1), caption,
                                  os.path.join(tmp, "still.rgb"))
            verdicts.append(v)
            lines.append(f"{caption} | {line}")
    return tally(verdicts), lines


class Generator:
    """Generation from noise of the held-out captions, decoded to frames."""

    def __init__(self, work):
        self.held = load_stills(os.path.join(work, "stills_heldout.pt"))
        self.vae = train.encoding_vae(work)
        self.mean, self.std = latent_stats(work)
        self.spm = os.path.join(work, "spiece.model")
        self.t5 = train.load_t5(work)
        self.ctx = self.contexts(self.held["captions"])
        (self.ctx_null,) = self.contexts([""])

    def contexts(self, captions):
        return encode_texts(self.t5, tokenize(self.spm, captions))

    def frames(self, dit, count=None, ctxs=None):
        """Generations of the held-out captions (or of ctxs, one per held-out noise)."""
        shape = (1,) + tuple(self.held["z"].shape[1:])
        out = []
        for i, ctx in enumerate((self.ctx if ctxs is None else ctxs)[:count]):
            # finish() from sigma 1 ignores its clean latent: x_1 is the noise of generator i.
            z = finish(dit, torch.zeros(shape), 1.0, ctx, self.ctx_null, 20, 5.0,
                       torch.Generator().manual_seed(i))
            with torch.no_grad():
                out.append(self.vae.decode(z * self.std + self.mean).clamp(-1, 1))
        return out

    def round_trips(self, count=None):
        with torch.no_grad():
            return [self.vae.decode(z[None] * self.std + self.mean).clamp(-1, 1) for z in self.held["z"][:count]]


def report(tag, counts, lines, path=None):
    text = f"{tag}: " + ", ".join(f"{a} {n}/{HELD_COUNT}" for a, n in counts.items())
    train.log(text)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n" + "\n".join(lines) + "\n")


def build_dit():
    torch.manual_seed(C["seed"] + 3)
    return WanDiT(**C["dit"])


class ProbedDiT(torch.nn.Module):
    """Training only (dit_probe_weight > 0): the DiT and a linear head that names the shape under
    each token from the tokens after the first dit_probe_layer blocks. Its state dict holds the
    DiT's weights under "dit." (dit_weights strips them)."""

    def __init__(self, dit):
        super().__init__()
        self.dit = dit
        torch.manual_seed(C["seed"] + 4)
        self.head = torch.nn.Linear(dit.cfg["dim"], (1 + len(SHAPES)) * C["dit_probe_cells"] ** 2)


def dit_weights(state):
    """A checkpoint's model or moving-average state -> the plain DiT's state dict."""
    if not any(k.startswith("dit.") for k in state):
        return state
    return {k[4:]: v for k, v in state.items() if k.startswith("dit.")}


def phase_train(args):
    os.makedirs(args.run, exist_ok=True)
    if args.procs > args.batch:
        sys.exit(f"stills: --procs {args.procs}: more processes than rows in a batch ({args.batch})")
    data_parallel.run(args.procs, lambda group: train_stills(args, group))


def train_stills(args, group):
    """phase_train as one of group.size data-parallel processes (train.py --procs): each draws
    the whole batch and runs its rows; rank 0 alone scores, logs and checkpoints."""
    d = load_stills(os.path.join(args.work, "stills.pt"))
    z, captions = d["z"], d["captions"]  # z [N, 16, 1, h, w]
    weight = d["foot"] * C["dit_obj_weight"] + 1  # [N, 1, h, w]
    probe_w, probe_at, cells = C["dit_probe_weight"], C["dit_probe_layer"], C["dit_probe_cells"]
    if probe_w and "shapes" not in d:
        sys.exit("stills: stills.pt has no token shapes (written before the shape probe): rerun `stills.py data`")
    if cells not in (1, 4):
        sys.exit(f"stills: dit_probe_cells {cells}: 1 (one label per token) or 4 (4x4 cells per token)")
    if probe_w and cells == 4 and "cell_shapes" not in d:
        sys.exit("stills: stills.pt has no cell labels (written before dit_probe_cells): run `stills.py labels WORK`")
    # 0 background, 1 + SHAPES index: int64 [N, L] per token, or uint8 [N, H/4, W/4] per cell
    labels = (d["shapes"] if cells == 1 else d["cell_shapes"]) if probe_w else None
    if probe_w and not 1 <= probe_at <= C["dit"]["num_layers"]:
        sys.exit(f"stills: dit_probe_layer {probe_at}: the DiT has blocks 1..{C['dit']['num_layers']}")
    if C["dit_edge_weight"]:  # the dit phase's outline band (train.footprint_edge)
        weight = weight + C["dit_edge_weight"] * train.footprint_edge(d["foot"])
    spm = os.path.join(args.work, "spiece.model")
    t5 = train.load_t5(args.work)
    ctx = encode_texts(t5, tokenize(spm, captions))
    (ctx_null,) = encode_texts(t5, tokenize(spm, [""]))
    dit = build_dit()
    model = ProbedDiT(dit) if probe_w else dit
    train.log(f"stills: {len(z)} stills, DiT {sum(p.numel() for p in dit.parameters())} parameters")
    cos, sin = rope_table(1, z.shape[3] // 2, z.shape[4] // 2, dit.blocks[0].self_attn.head_dim)
    rope = (cos.float(), sin.float())
    gen_eval = Generator(args.work) if args.every and group.main else None
    shift, decay, bsz = C["train_shift"], C["dit_obj_weight_decay"], args.batch

    def step(gen, k):
        # The dit phase's step on a batch of stills (train.py train_dit).
        idx = torch.randint(len(z), (bsz,), generator=gen)
        drop = torch.rand(bsz, generator=gen) < C["cfg_drop"]
        u = torch.rand(bsz, generator=gen)
        sigma = shift * u / (1 + (shift - 1) * u)
        x0 = z[idx]
        noise = torch.randn(x0.shape, generator=gen)
        s = sigma.view(-1, 1, 1, 1, 1)
        wt = weight[idx].unsqueeze(1)  # [B, 1, 1, h, w]
        if decay:
            wt = 1 + (wt - 1) * (1 - s) ** decay
        sh = group.shard(bsz)  # this process's rows of the batch
        x0, noise, s = x0[sh], noise[sh], s[sh]
        xt = (1 - s) * x0 + s * noise
        c, bias = dit.compact_context([ctx_null if drop[j] else ctx[int(idx[j])] for j in range(bsz)[sh]])
        with train.dit_training_forward(dit):  # as the dit phase: bf16 autocast, dit_train_gelu
            out = dit(xt, sigma[sh] * 1000, c, rope, bias, tap=probe_at if probe_w else None)
        if not probe_w:
            return train.shard_weighted_mse(out, noise - x0, wt, group)
        pred, tokens = out  # tokens [b, L, dim]
        mse = train.shard_weighted_mse(pred, noise - x0, wt, group)
        shapes = labels[idx] if cells == 1 else token_cells(labels[idx])  # [B, L] or [B, L, 16]
        tw = 1 + C["dit_obj_weight"] * (shapes > 0).float()  # object tokens (cells) weigh as object voxels
        logits = model.head(tokens.float())  # [b, L, 4 * cells^2]
        logits = logits.view(*shapes[sh].shape, 1 + len(SHAPES)).movedim(-1, 1)  # [b, 4, L(, 16)]
        ce = F.cross_entropy(logits, shapes[sh], reduction="none")
        ce = (ce * tw[sh]).mean() / tw.mean() * group.share(bsz)
        if group.main and k % 50 == 0:
            train.log(f"stills step {k}: flow-matching {float(mse) / group.share(bsz):.4f}, "
                      f"shape probe {float(ce) / group.share(bsz):.4f} (this process's rows)")
        return mse + probe_w * ce

    def evaluate(k):
        # The trained weights, and with dit_ema their moving average (what train.py exports).
        kinds = [("raw", dit.state_dict())] + ([("ema", dit_weights(tr.ema))] if tr.ema is not None else [])
        scored = copy.deepcopy(dit)
        for name, weights in kinds:
            scored.load_state_dict(weights)
            counts, lines = score_frames(args.score_clip, gen_eval.frames(scored.eval()),
                                         gen_eval.held["captions"])
            report(f"stills: step {k}, {name} weights, generated from noise", counts, lines,
                   os.path.join(args.run, f"score_{k}_{name}.txt"))

    tr = train.Trainer("stills", args.run, model, C["dit_lr"], ema=C["dit_ema"], group=group)
    tr.run(args.steps, lambda k: train.lr_at(k, args.steps, C["dit_lr"], C["dit_warmup"]), step,
           every=(args.every, evaluate) if args.every else None)
    if group.main:
        train.log(f"stills: {tr.step} steps in {tr.seconds:.0f} s")


def phase_score(args):
    g = Generator(args.work)
    if args.ground_truth:
        counts, lines = score_frames(args.score_clip, g.round_trips(), g.held["captions"])
        report("stills: held-out VAE round trips", counts, lines)
        return
    dit = checkpoint_dit(args)
    counts, lines = score_frames(args.score_clip, g.frames(dit), g.held["captions"])
    report(f"stills: {args.ckpt}", counts, lines)
    print("\n".join(lines))


def checkpoint_dit(args):
    """The DiT of args.ckpt (its moving average with --ema), in eval mode."""
    dit = build_dit()
    ck = torch.load(args.ckpt)
    if args.ema and ck.get("ema") is None:
        sys.exit(f"stills: {args.ckpt} has no moving average (its run had dit_ema 0): drop --ema")
    dit.load_state_dict(dit_weights(ck["ema"] if args.ema else ck["model"]))
    return dit.eval()


def shape_word_table(asked):
    """{asked shape: [(found shape, fill)] over its generations} -> one text line per asked shape."""
    rows = []
    for shape, found in asked.items():
        fills = [f for _, f in found]
        kinds = ", ".join(f"{k} {sum(s == k for s, _ in found)}" for k in SHAPES)
        mean = sum(fills) / len(fills) if fills else float("nan")
        rows.append(f"asked {shape}: {len(found)} objects found ({kinds}), mean fill {mean:.3f}")
    return rows


def phase_words(args):
    """Every held-out caption asked with each shape (finish_probe.ask_shape), from the caption's
    scoring noise: if the found fills do not follow the asked shape, the DiT ignores the word;
    if they follow it but miss the thresholds, it listens and cannot draw."""
    g = Generator(args.work)
    dit = checkpoint_dit(args)
    asked, frames = {}, {}
    for shape in SHAPES:
        captions = [ask_shape(c, shape) for c in g.held["captions"]]
        frames[shape] = g.frames(dit, ctxs=g.contexts(captions))
        counts, lines = score_frames(args.score_clip, frames[shape], captions)
        asked[shape] = [o for line in lines for o in found_fills(line)]
        train.log(f"stills words: asked {shape} everywhere: shape right in {counts['shape']}/{HELD_COUNT}")
    print("\n".join(shape_word_table(asked)))
    for a, b in ((0, 1), (0, 2), (1, 2)):
        # Mean |difference| of the decoded frames on the 0..255 scale: how far the word moves the picture.
        d = sum(float((x - y).abs().mean()) for x, y in zip(frames[SHAPES[a]], frames[SHAPES[b]]))
        print(f"{SHAPES[a]} -> {SHAPES[b]}: frames differ by {d / HELD_COUNT * 127.5:.2f} of 255 on average")


def write_strip(rows, path):
    """rows: lists of [1, 3, 1, H, W] frames in [-1, 1] -> a PNG grid at half size (ffmpeg)."""
    grid = torch.cat([torch.cat([f[0, :, 0] for f in row], dim=2) for row in rows], dim=1)  # [3, H', W']
    rgb = ((grid + 1) * 127.5).round().clamp(0, 255).byte().permute(1, 2, 0).contiguous()
    h, w = rgb.shape[:2]
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                    "-s", f"{w}x{h}", "-i", "-", "-vf", "scale=iw/2:ih/2", "-frames:v", "1", path],
                   input=rgb.numpy().tobytes(), check=True)


def phase_strip(args):
    """The first --columns held-out stills: their VAE round trips, then the checkpoint's
    generations from noise (the scoring's noise and sampler), raw weights and, with dit_ema,
    the average below them."""
    g = Generator(args.work)
    ck = torch.load(args.ckpt)
    dit = build_dit()
    rows = [g.round_trips(args.columns)]
    for weights in [ck["model"]] + ([ck["ema"]] if ck.get("ema") is not None else []):
        dit.load_state_dict(dit_weights(weights))
        rows.append(g.frames(dit.eval(), args.columns))
    write_strip(rows, args.out)
    train.log(f"stills: {args.out}: {len(rows)} rows of {args.columns} (step {ck['step']})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("data", "labels", "train", "score", "strip", "words"))
    ap.add_argument("work")
    ap.add_argument("run", nargs="?", help="train: the run's folder; score, strip, words: a stills_ckpt.pt")
    ap.add_argument("--vidax", default="build/release/vidax")
    ap.add_argument("--score-clip", default="build/vidax-tiny-score/score_clip")
    ap.add_argument("--count", type=int, default=8192, help="data: training stills")
    ap.add_argument("--seed", type=int, default=5000000, help="data, labels: seed of the first training still")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--every", type=int, default=500, help="train: score every this many steps (0: never)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--procs", type=int, default=1, help="train: data-parallel processes (train.py --procs)")
    ap.add_argument("--ground-truth", action="store_true", help="score: the held-out stills' VAE round trips")
    ap.add_argument("--ema", action="store_true", help="score, words: the checkpoint's moving average (dit_ema runs)")
    ap.add_argument("--out", help="strip: the PNG to write")
    ap.add_argument("--columns", type=int, default=8, help="strip: held-out stills shown")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    if args.what == "strip" and not (args.run and args.out):
        ap.error("strip needs a stills_ckpt.pt and --out PNG")
    if not 1 <= args.columns <= HELD_COUNT:
        ap.error(f"--columns must be in 1..{HELD_COUNT}")
    if args.what == "train" and not args.run:
        ap.error("train needs RUN, the run's folder")
    if args.what == "words" and not args.run:
        ap.error("words needs a stills_ckpt.pt")
    if args.what == "score" and bool(args.run) == args.ground_truth:
        ap.error("score takes a checkpoint or --ground-truth")
    args.ckpt = args.run
    if (args.what in ("score", "words") or (args.what == "train" and args.every)) and not os.path.exists(args.score_clip):
        ap.error(f"--score-clip {args.score_clip}: no such file (build it with research/vidax_tiny/score.sh)")
    if args.count < 1 or args.steps < 1 or args.every < 0 or args.batch < 1 or args.procs < 1:
        ap.error("--count, --steps, --batch and --procs must be positive, --every at least 0")
    apply_overrides(args.set)
    torch.set_num_threads(C["threads"])
    {"data": phase_data, "labels": phase_labels, "train": phase_train, "score": phase_score, "strip": phase_strip,
     "words": phase_words}[args.what](args)


if __name__ == "__main__":
    main()
