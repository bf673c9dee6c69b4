#!/usr/bin/python3
"""CTest check of the vidax-tiny training tools (tests/CMakeLists.txt, `research.vidax_tiny`):

1. `common.apply_overrides` (train.py / probe.py --set) converts to the entry's type, reaches
   model-dict keys, and refuses unknown or non-scalar keys;
2. the training code's own modules (models.py), rebuilt from the shipped models/vidax-tiny
   files by parity.py, still give the committed tests/data/vidax_tiny_parity.safetensors
   (which vidax is checked against): a change to models.py that would change the shipped
   model's function fails here;
3. the trainer's weight EMA (`dit_ema`) follows its formula step by step, survives a resume,
   refuses to resume a run that did not keep one, and `dit_result` (dit.pt, export
   --from-checkpoint) picks the averaged weights;
4. finish_probe.py's noising and Euler + CFG loop denoise: a still clip (a red square on dark
   blue) encoded by the shipped VAE, noised to sigma 0.3 and finished by the shipped DiT, comes
   back at least twice as close to its latent as the noised input was (a sign or scale error in
   either fails it; measured: 0.030 against 0.149);
5. joint image-video training (`dit_image_every`): the step schedule, and its premise that the
   causal VAE's first latent frame encodes the first pixel frame alone; probe.py words' caption
   edits;
6. the DiT phase end to end on a tiny WORK (4 synthetic clips of 64x64 x 5 frames, encoded by the
   shipped VAE, 4 steps alternating video and image batches): it runs, feeds each step the
   latents its kind asks for, and writes dit.pt; stills.py on the same WORK (its still latents
   are the clips' first latent frames; it trains and generates);
7. data-parallel training (train.py --procs, data_parallel.py): two processes take the same
   steps as one, and a worker that fails stops the run with a message;
8. score_clip, built from the libraries beside $VIDAX_BIN, on a rendered still: its verdicts
   and the "fills:" list that `stills.py words` reads;
9. the tokenizer phase writes the same spiece.model in two different working folders;
10. stills.py's shape probe (`dit_probe_weight`): the token labels name each object's shape at
   its centre on rendered scenes, the 4x4-pixel cell labels (`dit_probe_cells` 4) fill a lone
   square's, circle's and triangle's bounding boxes as those shapes do and map onto the tokens
   row-major, `stills.py labels` writes the same cell labels as `data` and refuses a wrong
   seed, and the probe (per token or per cell) adds its cross-entropy to the same batch's
   flow-matching loss without changing the DiT's output;
11. `models.gelu_form` (CONFIG dit_train_gelu "erf", a training speed-up) switches the DiT's
   GELUs to the erf form inside its block only (restored after it, also on an exception; the
   backward is the erf form's), moves the shipped DiT's output a little, and unknown forms are
   refused.

Exits 77 (CTest: skipped) when torch is not installed (scripts/test, what CI runs, installs
it; scripts/setup only with VIDAX_WITH_TORCH=1). The vidax binary (for `vidax synth`) is
$VIDAX_BIN, set by CTest, else build/release/vidax.
"""
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import common  # noqa: E402


def check_overrides():
    common.apply_overrides(["dit_steps=7", "dit.text_len=64", "dit_obj_weight_decay=1"])
    assert common.CONFIG["dit_steps"] == 7 and isinstance(common.CONFIG["dit_steps"], int)
    assert common.CONFIG["dit"]["text_len"] == 64
    assert common.CONFIG["dit_obj_weight_decay"] == 1.0
    assert isinstance(common.CONFIG["dit_obj_weight_decay"], float)
    for bad in ("no_such_key=1", "dit.no_such_key=1", "dit=1", "vae.dim_mult=1"):
        try:
            common.apply_overrides([bad])
        except SystemExit as e:
            assert bad.split("=")[0] in str(e), e
        else:
            raise AssertionError(f"--set {bad} was accepted")
    print("apply_overrides: ok")


def check_parity_file():
    committed = os.path.join(ROOT, "tests", "data", "vidax_tiny_parity.safetensors")
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, "parity.safetensors")
        subprocess.run([sys.executable, os.path.join(HERE, "parity.py"), "--model",
                        os.path.join(ROOT, "models", "vidax-tiny"), "--out", fresh],
                       check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        a, b = common.read_safetensors(committed), common.read_safetensors(fresh)
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for name in sorted(a):
        x, y = a[name].double(), b[name].double()
        assert x.shape == y.shape, (name, x.shape, y.shape)
        # The parity test's tolerances (docs/vidax-tiny.md, Parity): 1e-4 for the DiT output,
        # 1e-5 elsewhere (inputs come back exactly: same seeds and tokenizer).
        tol = 1e-4 if name == "out" else 1e-5
        err = float(((x - y).abs() - tol * y.abs()).max()) if x.numel() else 0.0
        assert err <= tol, f"{name}: differs from the committed file by {err:.3g} (tolerance {tol})"
    print(f"parity file: {len(a)} tensors reproduced")


def check_gelu_form():
    import train  # noqa: E402
    from exported import load_exported
    from models import gelu_form
    _, dit, _ = load_exported(os.path.join(ROOT, "models", "vidax-tiny"))
    gen = torch.Generator().manual_seed(0)
    x, ctx = torch.randn(1, 16, 1, 8, 8, generator=gen), torch.randn(1, 12, 64, generator=gen)
    t = torch.tensor([600.0])
    with torch.no_grad():
        tanh = dit(x, t, ctx)
        with gelu_form(dit, "erf"):
            erf = dit(x, t, ctx)
        again = dit(x, t, ctx)
    gelus = [m for m in dit.modules() if isinstance(m, torch.nn.GELU)]
    assert len(gelus) == 5 and all(m.approximate == "tanh" for m in gelus), [m.approximate for m in gelus]
    assert torch.equal(again, tanh), "gelu_form did not restore the tanh GELU"
    diff = float((erf - tanh).abs().max())
    # The forms differ by at most 4.7e-4 per activation: the output moves, a little.
    assert 0 < diff < 1e-2 * float(tanh.abs().max()), (diff, float(tanh.abs().max()))
    try:
        with gelu_form(dit, "erf"):
            raise KeyError("inside")
    except KeyError:
        pass
    assert all(m.approximate == "tanh" for m in gelus), "gelu_form did not restore after an exception"
    try:
        with gelu_form(dit, "relu"):
            pass
        raise AssertionError("gelu_form accepted 'relu'")
    except ValueError:
        pass
    # Autograd keeps the form of the forward: a backward after the block is the erf one's.
    m, z = torch.nn.GELU(approximate="tanh"), torch.linspace(-4, 4, 101, dtype=torch.float64, requires_grad=True)
    with gelu_form(m, "erf"):
        y = m(z)
    y.sum().backward()
    exact = torch.special.ndtr(z.detach()) + z.detach() * torch.exp(-z.detach() ** 2 / 2) / (2 * torch.pi) ** 0.5
    assert float((z.grad - exact).abs().max()) < 1e-12, float((z.grad - exact).abs().max())
    saved = common.CONFIG["dit_train_gelu"]
    common.CONFIG["dit_train_gelu"] = "sigmoid"
    try:
        with train.dit_training_forward(dit):
            pass
        raise AssertionError("dit_training_forward accepted dit_train_gelu 'sigmoid'")
    except SystemExit as e:
        assert "dit_train_gelu" in str(e), e
    finally:
        common.CONFIG["dit_train_gelu"] = saved
    print(f"gelu_form: the erf form moves the shipped DiT's output by {diff:.2e}, tanh restored, erf backward")


def check_ema():
    import train  # noqa: E402 (after torch: train.py needs it at import)
    torch.manual_seed(0)
    x = torch.randn(5, 3)
    with tempfile.TemporaryDirectory() as tmp:
        model = torch.nn.Linear(3, 2)
        seen = [{k: v.clone() for k, v in model.state_dict().items()}]  # weights before each step

        def step(gen, k):
            if k:
                seen.append({n: v.clone() for n, v in model.state_dict().items()})
            return (model(x) ** 2).sum()

        tr = train.Trainer("t", tmp, model, 0.1, ema=0.5)
        tr.run(3, lambda k: 0.1, step)
        seen.append({k: v.clone() for k, v in model.state_dict().items()})
        expect = {k: v.clone() for k, v in seen[0].items()}
        for k in range(3):
            d = min(0.5, (1 + k) / (10 + k))
            for n in expect:
                expect[n] = d * expect[n] + (1 - d) * seen[k + 1][n]
        for n in expect:
            assert torch.allclose(tr.ema[n], expect[n], atol=1e-6), (n, tr.ema[n], expect[n])
            assert not torch.allclose(expect[n], seen[-1][n]), "the EMA equals the raw weights"
        again = train.Trainer("t", tmp, torch.nn.Linear(3, 2), 0.1, ema=0.5)
        assert again.step == 3 and all(torch.equal(again.ema[n], tr.ema[n]) for n in expect)
        result = train.dit_result(torch.load(os.path.join(tmp, "t_ckpt.pt")), False)
        assert result["step"] == 3
        assert all(torch.equal(result["model"][n], tr.ema[n]) for n in expect)
        assert all(torch.equal(result["model_raw"][n], seen[-1][n]) for n in expect)
        raw = train.dit_result(torch.load(os.path.join(tmp, "t_ckpt.pt")), False, raw=True)
        assert all(torch.equal(raw["model"][n], seen[-1][n]) for n in expect)
        plain = train.Trainer("p", tmp, torch.nn.Linear(3, 2), 0.1)
        plain.run(1, lambda k: 0.1, lambda gen, k: (plain.model(x) ** 2).sum())
        try:
            train.Trainer("p", tmp, torch.nn.Linear(3, 2), 0.1, ema=0.5)
        except SystemExit as e:
            assert "no EMA weights" in str(e), e
        else:
            raise AssertionError("resumed a run without EMA weights with EMA on")
    print("weight EMA: ok")


def check_data_parallel():
    """Two processes (train.py --procs 2) take the same steps as one: a batch of 5 rows split
    2 + 3, a weighted loss, EMA, 4 steps; then a worker that fails stops the run with a message
    instead of leaving rank 0 waiting in gloo."""
    import data_parallel  # noqa: E402
    import train  # noqa: E402
    gen = torch.Generator().manual_seed(0)
    xs, ys = torch.randn(64, 3, generator=gen), torch.randn(64, 2, generator=gen)
    ws = torch.rand(64, 1, generator=gen) + 0.5

    def train_in(work, group):
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 2)

        def step(gen, k):
            idx = torch.randint(64, (5,), generator=gen)
            sh = group.shard(5)
            return train.shard_weighted_mse(model(xs[idx][sh]), ys[idx][sh], ws[idx], group)

        train.Trainer("t", work, model, 0.1, ema=0.5, group=group).run(4, lambda k: 0.1, step)

    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        train_in(one, data_parallel.Group())
        data_parallel.run(2, lambda group: train_in(two, group))
        a, b = (torch.load(os.path.join(d, "t_ckpt.pt")) for d in (one, two))
        assert sorted(os.listdir(one)) == sorted(os.listdir(two)), (os.listdir(one), os.listdir(two))
    assert a["step"] == b["step"] == 4
    for part in ("model", "ema"):
        for n in a[part]:
            assert torch.allclose(a[part][n], b[part][n], rtol=1e-5, atol=1e-6), (part, n, a[part][n], b[part][n])
    assert not torch.allclose(a["model"]["weight"], a["ema"]["weight"])
    la, lb = [l[1] for l in a["losses"]], [l[1] for l in b["losses"]]
    assert all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(la, lb)), (la, lb)
    failing = ("import sys, time; sys.path.insert(0, %r); import data_parallel\n"
               "def fn(g):\n    if g.rank == 1:\n        raise RuntimeError('worker broke')\n"
               "    time.sleep(60)\n"
               "data_parallel.run(2, fn)\n") % HERE
    with tempfile.TemporaryDirectory() as tmp:  # the run's own temporary folder goes here
        r = subprocess.run([sys.executable, "-c", failing], capture_output=True, text=True, timeout=50,
                           env=dict(os.environ, TMPDIR=tmp))
        left = os.listdir(tmp)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "worker broke" in r.stderr and "worker process 1 failed" in r.stderr, r.stderr
    assert not left, f"a failed run left {left} behind"
    with tempfile.TemporaryDirectory() as tmp:  # a SIGKILLed run's folder is swept by the next run
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        for pid in (dead.pid, os.getpid()):
            os.makedirs(os.path.join(tmp, f"{data_parallel.PREFIX}{pid}-x"))
        os.makedirs(os.path.join(tmp, "unrelated"))
        data_parallel.sweep_stale_folders(tmp)
        kept = sorted(os.listdir(tmp))
    assert kept == sorted([f"{data_parallel.PREFIX}{os.getpid()}-x", "unrelated"]), kept
    print(f"data parallel: 2 processes match 1 over 4 steps (losses {la[0]:.4f} .. {la[-1]:.4f}); "
          "a failed worker stops the run")


def check_image_steps():
    import probe  # noqa: E402
    import train  # noqa: E402
    from exported import load_exported  # noqa: E402
    kinds = [train.dit_step_kind(k, 2, 3) for k in range(9)]
    assert kinds == ["lowres"] * 2 + ["video", "video", "image"] * 2 + ["video"], kinds
    assert {train.dit_step_kind(k, 0, 0) for k in range(5)} == {"video"}
    # An image step trains on z[:, :, :1] as the latent of the clip's first frame: true only if
    # latent frame 0 sees no later frame (Wan's causal VAE). Measured: equal to ~1e-6.
    _, _, vae = load_exported(os.path.join(ROOT, "models", "vidax-tiny"))
    video = torch.rand(1, 3, 9, 64, 64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    with torch.no_grad():
        whole, first = vae.encode_mu(video), vae.encode_mu(video[:, :, :1])
    assert whole.shape[2] == 3 and first.shape[2] == 1, (whole.shape, first.shape)
    gap = float((whole[:, :, :1] - first).abs().max())
    assert gap <= 1e-4 * float(first.abs().max()), f"latent frame 0 depends on later frames ({gap:.3g})"
    assert float((whole[:, :, 1:] - whole[:, :, :1]).abs().max()) > 0.1  # the frames do differ
    edits = {
        ("a red square moves up on a gray background", "shape"): "a red triangle moves up on a gray background",
        ("on a dark red background, a yellow triangle shrinks", "shape"):
            "on a dark red background, a yellow circle shrinks",
        ("an orange circle rises on a dark blue background", "colour"):
            "a yellow circle rises on a dark blue background",
        ("a purple square rises against a dark green background", "colour"):
            "a white square rises against a dark green background",
        ("a white circle bounces on a dark red background", "colour"):
            "a red circle bounces on a dark red background",
    }
    for (caption, what), want in edits.items():
        got = probe.swap_object(caption, what)
        assert got == want, (caption, what, got)
    from finish_probe import ask_shape  # noqa: E402
    two = "a white square moves up and a red triangle gets bigger against a gray background"
    assert ask_shape(two, "circle") == "a white circle moves up and a red circle gets bigger against a gray background"
    assert ask_shape("a red circle rises on a dark blue background", "circle") == "a red circle rises on a dark blue background"
    foot = torch.zeros(1, 1, 7, 7)
    foot[0, 0, 2:5, 2:5] = 1  # a 3x3 object: its outline ring and the ring around it, not its centre
    edge = train.footprint_edge(foot)[0, 0]
    want = torch.zeros(7, 7)
    want[1:6, 1:6] = 1
    want[3, 3] = 0
    assert torch.equal(edge, want), edge
    print(f"image steps: schedule ok, latent frame 0 is the first frame's (gap {gap:.1e}); caption edits ok")


def check_dit_phase():
    import argparse
    import shutil
    import train  # noqa: E402
    vidax = os.environ.get("VIDAX_BIN", os.path.join(ROOT, "build", "release", "vidax"))
    assert os.path.exists(vidax), f"{vidax}: no vidax binary (set VIDAX_BIN)"
    shipped = os.path.join(ROOT, "models", "vidax-tiny")
    common.apply_overrides(["clips=4", "holdout=0", "size=64", "frames=5", "dit_steps=4", "dit_batch=2",
                            "dit_image_every=2", "dit_image_batch=3", "dit_image_sigma_min=0.8",
                            "dit.text_len=64", "dit_bf16=0", "dit_ema=0.9", "dit_layout=random",
                            "vae_tune_steps=0", "t5_pretrain_steps=0", "dit_lowres_steps=0", "dit_edge_weight=2"])
    seen = []
    forward = train.WanDiT.forward

    def spy(self, x, t, *rest, **kw):
        seen.append((x.shape[0], x.shape[2], float(t.min()) / 1000))  # batch, latent frames, least sigma
        return forward(self, x, t, *rest, **kw)

    with tempfile.TemporaryDirectory() as work:
        args = argparse.Namespace(work=work, vidax=vidax, procs=1)
        train.phase_data(args)
        torch.save({"model": torch.load(os.path.join(shipped, "Wan2.1_VAE.pth"))}, os.path.join(work, "vae.pt"))
        shutil.copy(os.path.join(shipped, "google", "umt5-xxl", "spiece.model"), work)
        subprocess.run(["spm_export_vocab", f"--model={work}/spiece.model", f"--output={work}/spiece.vocab"],
                       check=True)
        train.phase_latents(args)
        train.WanDiT.forward = spy
        try:
            train.phase_dit(args)
        finally:
            train.WanDiT.forward = forward
        result = torch.load(os.path.join(work, "dit.pt"))
        losses = [entry[1] for entry in torch.load(os.path.join(work, "dit_ckpt.pt"))["losses"]]
        check_stills(work, vidax)
    assert result["step"] == 4 and "model_raw" in result, sorted(result)
    assert len(losses) == 4 and all(0 < l < 100 for l in losses), losses
    kinds = [(b, f) for b, f, _ in seen]
    assert kinds == [(2, 2), (3, 1), (2, 2), (3, 1)], kinds  # video: 2 latent frames of 5 pixel frames
    assert all(s >= 0.8 for b, f, s in seen if f == 1), seen  # dit_image_sigma_min
    print(f"dit phase: 4 steps (video, image, video, image), losses {losses[0]:.3f} .. {losses[-1]:.3f}")


def check_stills(work, vidax):
    """stills.py on the tiny WORK of check_dit_phase: a one-frame scene of seed S is the first
    frame of clip S (vidax synth), so its still latent must equal that clip's first latent
    frame in latents.pt (the causal VAE encodes frame 0 alone; the same normalisation); the
    footprint is the clip's first one; a short run trains and generates every held-out caption."""
    import argparse
    import stills
    import train
    args = argparse.Namespace(work=work, vidax=vidax, count=3, seed=common.CONFIG["data_seed"])
    stills.phase_data(args)
    d = torch.load(os.path.join(work, "stills.pt"))
    lat = torch.load(os.path.join(work, "latents.pt"))
    first = train.normalised_latents(lat)[:3, :, :1]  # [3, 16, 1, 8, 8]
    assert d["z"].shape == first.shape, (d["z"].shape, first.shape)
    gap = float((d["z"] - first).abs().max())
    assert gap < 1e-4, f"stills: still latent differs from the clip's first latent frame by {gap}"
    assert d["captions"] == lat["captions"][:3], d["captions"]
    assert 0 < float(d["foot"].mean()) < 1, "stills: empty or full object footprints"
    held = torch.load(os.path.join(work, "stills_heldout.pt"))
    assert held["z"].shape[0] == stills.HELD_COUNT and not set(held["captions"]) <= set(d["captions"])
    run = os.path.join(work, "stills_run")
    stills.phase_train(argparse.Namespace(work=work, run=run, steps=3, every=0, batch=2, procs=1))
    ck = torch.load(os.path.join(run, "stills_ckpt.pt"))
    assert ck["step"] == 3 and all(0 < l < 100 for _, l, _ in ck["losses"]), ck["losses"]
    # --procs 2 (one row each) is the same run up to float summation order.
    run2 = os.path.join(work, "stills_run_2procs")
    stills.phase_train(argparse.Namespace(work=work, run=run2, steps=3, every=0, batch=2, procs=2))
    ck2 = torch.load(os.path.join(run2, "stills_ckpt.pt"))
    pairs = list(zip([l for _, l, _ in ck["losses"]], [l for _, l, _ in ck2["losses"]]))
    assert len(pairs) == 3 and all(abs(a - b) <= 1e-5 * abs(a) for a, b in pairs), pairs
    gap2 = max(float((a - b).abs().max()) for a, b in zip(ck["model"].values(), ck2["model"].values()))
    assert gap2 < 1e-5, f"stills --procs 2: weights differ from one process's by {gap2}"
    # dit_edge_weight adds weight on the outline band: the same first batch scores a larger loss.
    run3 = os.path.join(work, "stills_run_edge")
    base = common.CONFIG["dit_edge_weight"]
    common.CONFIG["dit_edge_weight"] = base + 9.0
    try:
        stills.phase_train(argparse.Namespace(work=work, run=run3, steps=1, every=0, batch=2, procs=1))
    finally:
        common.CONFIG["dit_edge_weight"] = base
    edge_loss = torch.load(os.path.join(run3, "stills_ckpt.pt"))["losses"][0][1]
    assert edge_loss > ck["losses"][0][1] * 1.01, (edge_loss, ck["losses"][0][1])
    dit = stills.build_dit()
    dit.load_state_dict(ck["model"])
    g = stills.Generator(work)
    frames = g.frames(dit.eval())
    assert len(frames) == stills.HELD_COUNT and frames[0].shape == (1, 3, 1, 64, 64), frames[0].shape
    assert all(torch.isfinite(f).all() and f.abs().max() <= 1 for f in frames)
    # `words` generates other captions from the same noise: its own captions give the same frames.
    again = g.frames(dit, count=2, ctxs=g.contexts(g.held["captions"]))
    assert all(torch.equal(a, b) for a, b in zip(again, frames[:2]))
    asked = g.frames(dit, count=1, ctxs=g.contexts([g.held["captions"][0] + " square"]))
    assert not torch.equal(asked[0], frames[0]), "another caption gave the same frame"
    table = stills.shape_word_table({"circle": [("circle", 0.8), ("square", 0.9)], "square": []})
    assert table == ["asked circle: 2 objects found (circle 1, square 1, triangle 0), mean fill 0.850",
                     "asked square: 0 objects found (circle 0, square 0, triangle 0), mean fill nan"], table
    png = os.path.join(work, "strip.png")
    stills.phase_strip(argparse.Namespace(work=work, ckpt=os.path.join(run, "stills_ckpt.pt"), out=png, columns=3))
    with open(png, "rb") as f:
        head = f.read(24)
    # PNG signature, then the IHDR chunk's width and height: 3 columns x 3 rows (round trips,
    # raw weights, their average: dit_ema 0.9 here) of 64x64 frames at half size.
    size = struct.unpack(">II", head[16:24])
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and size == (96, 96), (head[:8], size)
    check_shape_probe_run(work, ck, vidax)
    print(f"stills: still latents equal the clips' first latent frames (gap {gap:.1e}); "
          f"3 training steps, {len(frames)} held-out captions generated, strip {size[0]}x{size[1]}")


def check_shape_probe_run(work, ck, vidax):
    """dit_probe_weight w on check_stills' WORK: the same init and first batch as its plain run
    (ck), so the first loss is the plain run's plus w times the probe's cross-entropy, which
    starts near ln 4 (a fresh linear head over 4 classes); the checkpoint holds the head, and
    dit_weights gives weights a plain DiT loads; tap leaves the DiT's output unchanged."""
    import argparse
    import stills
    d = torch.load(os.path.join(work, "stills.pt"))
    assert d["shapes"].shape == (3, 16) and d["shapes"].dtype == torch.int64, d["shapes"].shape  # 64x64: 4x4 tokens
    assert int(d["shapes"].min()) >= 0 and int(d["shapes"].max()) <= 3

    def probe_step(name, **settings):
        """One probed step (weight 2 at block 1) -> its checkpoint and the probe's cross-entropy."""
        run, saved = os.path.join(work, name), dict(common.CONFIG)
        common.CONFIG.update(dit_probe_weight=2.0, dit_probe_layer=1, **settings)
        try:
            stills.phase_train(argparse.Namespace(work=work, run=run, steps=1, every=0, batch=2, procs=1))
        finally:
            common.CONFIG.clear()
            common.CONFIG.update(saved)
        probed = torch.load(os.path.join(run, "stills_ckpt.pt"))
        return probed, (probed["losses"][0][1] - ck["losses"][0][1]) / 2.0

    probed, ce = probe_step("stills_run_probe")
    assert 0.7 < ce < 2.5, f"shape probe: first cross-entropy {ce}, expected near ln 4 = 1.39"
    assert {"head.weight", "head.bias"} <= set(probed["model"]), sorted(probed["model"])[:4]
    # Per cell (dit_probe_cells 4): the labels `data` wrote come back from `labels`, and a fresh
    # head over 4 classes per cell starts near ln 4 too.
    cells = d["cell_shapes"]
    assert cells.shape == (3, 16, 16) and cells.dtype == torch.uint8, cells.shape
    stills.phase_labels(argparse.Namespace(work=work, vidax=vidax, seed=common.CONFIG["data_seed"]))
    assert torch.equal(torch.load(os.path.join(work, "stills.pt"))["cell_shapes"], cells)
    try:
        stills.phase_labels(argparse.Namespace(work=work, vidax=vidax, seed=common.CONFIG["data_seed"] + 1))
        raise AssertionError("stills labels: a wrong --seed was accepted")
    except SystemExit as e:
        assert "pass the --seed of its `data` run" in str(e), e
    probed4, ce4 = probe_step("stills_run_probe_cells", dit_probe_cells=4)
    assert 0.7 < ce4 < 2.5, f"shape probe per cell: first cross-entropy {ce4}, expected near ln 4 = 1.39"
    assert probed4["model"]["head.weight"].shape[0] == 4 * 16, probed4["model"]["head.weight"].shape
    dit = stills.build_dit()
    dit.load_state_dict(stills.dit_weights(probed["model"]))  # strict: exactly the DiT's keys
    assert stills.dit_weights(ck["model"]) is ck["model"]
    x = torch.randn(1, 16, 1, 8, 8)
    ctx, bias = dit.compact_context([torch.randn(5, common.CONFIG["dit"]["text_dim"])])
    with torch.no_grad():
        plain = dit(x, torch.tensor([500.0]), ctx, None, bias)
        out, tokens = dit(x, torch.tensor([500.0]), ctx, None, bias, tap=2)
    assert torch.equal(plain, out) and tokens.shape == (1, 16, common.CONFIG["dit"]["dim"]), tokens.shape
    print(f"shape probe: first step adds cross-entropy {ce:.3f} per token, {ce4:.3f} per cell, "
          f"to the flow-matching loss")


def check_token_shapes(vidax):
    """stills.token_shapes on rendered 256x256 scenes of the large layout: the token under each
    object's centre names its shape, the labels name no shape the scene lacks, and the corner
    tokens are background."""
    import numpy as np
    import stills
    from dataset import SynthDataset
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([vidax, "--threads", "1", "synth", "--out", tmp, "--count", "24", "--seed", "5000000",
                        "--size", "256x256", "--frames", "1", "--layout", "large"], check=True,
                       stdout=subprocess.DEVNULL)
        ds = SynthDataset(tmp)
        palette = ds.manifest["palette"]["objects"]
        fills = {}
        for i in range(len(ds)):
            labels = stills.token_shapes(ds.clip(i), ds.entry(i), palette).reshape(16, 16)
            ids = {1 + common.SHAPES.index(o["shape"]) for o in ds.entry(i)["objects"]}
            assert set(labels.flatten().tolist()) - {0} == ids, (ds.caption(i), labels)
            for o in ds.entry(i)["objects"]:
                # Centres in permille of the frame; a triangle's centroid lies below its centre.
                x, y = o["start"]["x"] * 256 // 1000 // 16, o["start"]["y"] * 256 // 1000 // 16
                want = 1 + common.SHAPES.index(o["shape"])
                near = labels[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2]
                assert (labels[y, x] == want) or (o["shape"] == "triangle" and (near == want).any()), \
                    (ds.caption(i), o, labels)
            assert labels[0, 0] == 0 and labels[15, 15] == 0
            # Cells: a lone object's cells fill their bounding box as the shape fills its own.
            grid = stills.cell_shapes(ds.clip(i), ds.entry(i), palette)  # [64, 64]
            assert set(grid.flatten().tolist()) - {0} == ids, (ds.caption(i), grid)
            if len(ds.entry(i)["objects"]) == 1:
                ys, xs = np.nonzero(grid)
                fill = len(ys) / ((ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1))
                fills.setdefault(ds.entry(i)["objects"][0]["shape"], []).append(fill)
        assert len(fills) == 3, f"want a lone object of every shape among the scenes: {fills}"
        assert min(fills["square"]) > 0.85 and all(0.6 < f < 0.85 for f in fills["circle"]) and \
            max(fills["triangle"]) < 0.6, fills
        # token_cells: token (0, 1) of an 8x8-cell grid is rows 0..3, columns 4..7, row-major.
        per_token = stills.token_cells(torch.arange(64, dtype=torch.uint8).view(1, 8, 8))
        assert per_token.shape == (1, 4, 16) and per_token[0, 1, 5] == 1 * 8 + 5 and per_token[0, 2, 0] == 32
    print(f"token shapes: {len(ds)} rendered scenes labelled at their objects' centres; lone objects' "
          f"cell fills " + ", ".join(f"{k} {min(v):.2f}-{max(v):.2f}" for k, v in sorted(fills.items())))


def check_score_clip():
    """score_clip (built as score.sh builds it, from the libraries beside $VIDAX_BIN) on a
    rendered still: colour, shape, background and count right, and its "fills:" list
    (clip_scoring.found_fills, what `stills.py words` reads) names the caption's shapes with
    fills in the analyzer's range for them."""
    import re
    from clip_scoring import found_fills, score_video
    from dataset import SynthDataset
    vidax = os.environ.get("VIDAX_BIN", os.path.join(ROOT, "build", "release", "vidax"))
    lib = os.path.dirname(vidax)
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "score_clip")
        subprocess.run(["g++", "-std=c++20", "-O1", "-fopenmp", "-I" + os.path.join(ROOT, "src"),
                        os.path.join(HERE, "score_clip.cpp"), "-o", exe] +
                       [os.path.join(lib, f"libvidax_{n}.a") for n in ("synth", "io", "core")] + ["-lhwy", "-lz"],
                       check=True)
        # Seed 12 of the large layout: a red circle and a cyan square (two entries in the list).
        subprocess.run([vidax, "--threads", "1", "synth", "--out", os.path.join(tmp, "c"), "--count", "1",
                        "--seed", "12", "--size", "256x256", "--frames", "1", "--layout", "large"],
                       check=True, stdout=subprocess.DEVNULL)
        ds = SynthDataset(os.path.join(tmp, "c"))
        video = torch.from_numpy(ds.video(0))[None].expand(-1, -1, 17, -1, -1)  # [1, 3, 17, H, W]
        caption = ds.caption(0)
        verdict, line = score_video(exe, video, caption, os.path.join(tmp, "still.rgb"))
    assert all(verdict[a] for a in ("color", "shape", "background", "count")), (caption, line)
    found = found_fills(line)
    asked = re.findall(r"\b(" + "|".join(common.SHAPES) + r")\b", caption)
    assert sorted(s for s, _ in found) == sorted(asked) and len(found) == 2, (caption, line)
    ranges = {"square": (0.89, 1.01), "circle": (0.64, 0.89), "triangle": (0.0, 0.64)}
    assert all(ranges[s][0] <= f < ranges[s][1] for s, f in found), line
    print(f"score_clip: '{caption}' -> {line}")


def check_tokenizer_reproduces():
    """The tokenizer phase gives the same spiece.model byte for byte in two working folders
    (spm_train records its --input and --model_prefix in the model: they must not name WORK)."""
    import argparse
    import train
    vidax = os.environ.get("VIDAX_BIN", os.path.join(ROOT, "build", "release", "vidax"))
    saved = common.CONFIG["caption_clips"]
    common.CONFIG["caption_clips"] = 300
    models = []
    try:
        for _ in range(2):
            with tempfile.TemporaryDirectory() as work:
                train.phase_tokenizer(argparse.Namespace(work=work, vidax=vidax))
                with open(os.path.join(work, "spiece.model"), "rb") as f:
                    models.append(f.read())
    finally:
        common.CONFIG["caption_clips"] = saved
    assert models[0] == models[1] and len(models[0]) > 1000, [len(m) for m in models]
    print(f"tokenizer: the same {len(models[0])}-byte model from two working folders")


def check_finish_probe():
    from exported import load_exported  # noqa: E402
    from finish_probe import encode_caption, finish  # noqa: E402
    from models import WAN21_MEAN, WAN21_STD  # noqa: E402
    folder = os.path.join(ROOT, "models", "vidax-tiny")
    t5, dit, vae = load_exported(folder)
    spm = os.path.join(folder, "google", "umt5-xxl", "spiece.model")
    video = torch.empty(1, 3, 9, 128, 128)  # [b, rgb, frames, h, w] in [-1, 1]
    for c, (background, square) in enumerate(zip((15, 20, 75), (220, 40, 40))):
        video[:, c] = background / 127.5 - 1
        video[:, c, :, 40:80, 40:80] = square / 127.5 - 1
    mean = torch.tensor(WAN21_MEAN).view(1, -1, 1, 1, 1)
    std = torch.tensor(WAN21_STD).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        z = (vae.encode_mu(video) - mean) / std
    s0 = 0.3
    noised = (1 - s0) * z + s0 * torch.randn(z.shape, generator=torch.Generator().manual_seed(0))
    out = finish(dit, z, s0, encode_caption(t5, spm, "a red square stays still on a dark blue background"),
                 encode_caption(t5, spm, ""), 14, 5.0, torch.Generator().manual_seed(0))  # same noise
    before, after = float(((noised - z) ** 2).mean()), float(((out - z) ** 2).mean())
    assert after < 0.5 * before, f"finish_probe: finished mse {after:.4f}, noised {before:.4f}"
    print(f"finish_probe denoises: mse {before:.3f} -> {after:.3f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    check_overrides()
    check_parity_file()
    check_gelu_form()
    check_ema()
    check_image_steps()
    check_dit_phase()
    check_data_parallel()
    check_finish_probe()
    check_score_clip()
    check_tokenizer_reproduces()
    check_token_shapes(os.environ.get("VIDAX_BIN", os.path.join(ROOT, "build", "release", "vidax")))
