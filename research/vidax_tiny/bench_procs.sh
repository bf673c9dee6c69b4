#!/bin/sh
# Seconds per DiT training step with one process and with `--procs N` (docs/vidax-tiny.md),
# side by side: both continue WORK's checkpoint for 30 steps in scratch copies of WORK (WORK
# itself is not touched), alternating, ROUNDS times; steps 6-30 are timed (the first 5 warm up).
# Usage: research/vidax_tiny/bench_procs.sh WORK N ROUNDS [--set KEY=VALUE ...]   (from the repo
# root; the --set values must be WORK's run's own, as for measure_run.sh; stop WORK's trainer
# first, the benchmark needs the cores)
set -eu
[ $# -ge 3 ] || { echo "usage: $0 WORK N ROUNDS [--set KEY=VALUE ...]" >&2; exit 2; }
work=$(realpath "$1") procs=$2 rounds=$3
shift 3
ckpt="$work/dit_ckpt.pt"
[ -f "$ckpt" ] || { echo "$0: $ckpt: no DiT checkpoint to continue" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
start=$($py -c "import torch, sys; print(torch.load(sys.argv[1])['step'])" "$ckpt")
rate() {  # WORK -> seconds per step over steps start+5 .. start+30 (the loss CSV's clock)
  $py -c "
import csv, sys
t = {int(r[0]): float(r[2]) for r in list(csv.reader(open(sys.argv[1])))[1:]}
print(round((t[$start + 30] - t[$start + 5]) / 25, 3))" "$1/dit_loss.csv"
}
for n in 1 "$procs"; do
  mkdir "$tmp/p$n"
  # Everything but the trainer's own files, linked (the latents are read only).
  for f in "$work"/*; do
    case $(basename "$f") in dit_ckpt.pt | dit_loss.csv | dit.pt | dit.log) ;; *) ln -s "$f" "$tmp/p$n/" ;; esac
  done
done
round=1
while [ "$round" -le "$rounds" ]; do
  for n in 1 "$procs"; do
    cp "$ckpt" "$tmp/p$n/dit_ckpt.pt"
    rm -f "$tmp/p$n/dit.pt"
    OMP_NUM_THREADS=1 $py research/vidax_tiny/train.py dit --work "$tmp/p$n" "$@" \
      --set dit_steps=$((start + 30)) --procs "$n" > "$tmp/p$n.log"
    echo "round $round, $n process(es): $(rate "$tmp/p$n") s/step"
  done
  round=$((round + 1))
done
