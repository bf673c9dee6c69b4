#!/usr/bin/python3
"""Seconds per DiT training step with Wan's tanh GELU and with the erf one (CONFIG
dit_train_gelu), side by side (docs/vidax-tiny.md, Throughput; docs/benchmarks.md).

A step is what train.py's dit phase and stills.py train run: the training forward
(train.dit_training_forward: bf16 autocast unless dit_bf16 0, the GELU form), the weighted
flow-matching loss, backward, gradient clipping and AdamW, on random latents and contexts of the
DiT's CONFIG size. The two forms alternate, ROUNDS times; each times STEPS steps after 3 warm-up
steps. No WORK is needed. One thread, as training runs:

    OMP_NUM_THREADS=1 /usr/bin/python3 research/vidax_tiny/bench_step.py [--frames 1] [--batch 16]
        [--rounds 3] [--steps 10] [--set KEY=VALUE ...]

--frames 1 is a still (256 tokens at 256x256), 5 a 17-frame clip (1,280 tokens).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402
from common import CONFIG as C, apply_overrides  # noqa: E402
from models import GELU_FORMS, WanDiT, rope_table  # noqa: E402


def seconds_per_step(dit, opt, batch, steps):
    x0, noise, weight, contexts, sigma, rope = batch
    xt = (1 - sigma.view(-1, 1, 1, 1, 1)) * x0 + sigma.view(-1, 1, 1, 1, 1) * noise

    def step():
        c, bias = dit.compact_context(contexts)
        with train.dit_training_forward(dit):
            pred = dit(xt, sigma * 1000, c, rope, bias)
        loss = (((pred.float() - (noise - x0)) ** 2) * weight).mean() / weight.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(dit.parameters(), 1.0)
        opt.step()

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1, help="latent frames (1: a still, 5: a 17-frame clip)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per round and form")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    if args.frames < 1 or args.batch < 1 or args.rounds < 1 or args.steps < 1:
        sys.exit("bench_step: --frames, --batch, --rounds and --steps must be at least 1")
    if any(kv.split("=", 1)[0] == "dit_train_gelu" for kv in args.set):
        sys.exit("bench_step: it times both GELU forms; --set dit_train_gelu is not an option here")
    apply_overrides(args.set)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, 16, args.frames, 32, 32)  # 256x256 pixels: 32x32 latents, 16x16 tokens
    x0, noise = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    weight = 1 + 9 * (torch.rand((args.batch, 1, args.frames, 32, 32), generator=gen) < 0.06).float()
    contexts = [torch.randn(12, C["dit"]["text_dim"], generator=gen) for _ in range(args.batch)]
    sigma = torch.rand(args.batch, generator=gen)
    torch.manual_seed(C["seed"] + 3)
    template = WanDiT(**C["dit"])
    cos, sin = rope_table(args.frames, 16, 16, template.blocks[0].self_attn.head_dim)
    batch = (x0, noise, weight, contexts, sigma, (cos.float(), sin.float()))
    times = {"tanh": [], "erf": []}
    for r in range(args.rounds):
        for form in GELU_FORMS:
            C["dit_train_gelu"] = form
            dit = WanDiT(**C["dit"])
            dit.load_state_dict(template.state_dict())  # both forms start from the same weights
            opt = torch.optim.AdamW(dit.parameters(), lr=1e-4)
            times[form].append(seconds_per_step(dit, opt, batch, args.steps))
            print(f"round {r + 1}, {form} GELU: {times[form][-1]:.3f} s/step", flush=True)
    best = {form: min(t) for form, t in times.items()}
    print(f"{args.frames} latent frame(s), batch {args.batch}, bf16 {C['dit_bf16']}: best tanh "
          f"{best['tanh']:.3f} s/step, erf {best['erf']:.3f} s/step, {best['tanh'] / best['erf']:.2f}x")


if __name__ == "__main__":
    main()
