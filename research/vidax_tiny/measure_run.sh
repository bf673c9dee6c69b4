#!/bin/sh
# Measures a DiT run in progress (docs/vidax-tiny.md, "The video runs across sessions") at the step its
# checkpoint has reached, with the yardsticks used there:
#   OUT/measured_ckpt.pt   the checkpoint measured (copied first: a running trainer replaces
#                          WORK/dit_ckpt.pt every few minutes, and every step below reads this one)
#   OUT/probe.txt          probe.py x0 (sigma-1 x0 error, global colour error, caption effect)
#   OUT/words.txt          probe.py words (how far the shape and colour words move x0)
#   OUT/model/             the exported folder (EMA weights when the run keeps them, unless --raw)
#   OUT/finish.txt         finish_probe.py from sigma 0.5 / 0.75 / 0.9, 16 held-out clips
#   OUT/eval.json          vidax eval, the 48-clip suite from pure noise
#   OUT/strip.png          vidax demo's frame strip of the default caption
#
#   research/vidax_tiny/measure_run.sh WORK OUT LAYOUT [--raw] [--set KEY=VALUE ...]
#
# --raw measures the trained weights instead of their moving average (a fork whose average
# still holds mostly the old run's weights).
# LAYOUT is the run's dit_layout (random, canonical or large); the --set arguments must be the
# run's own (a DiT trained with dit.text_len=64 is rebuilt with it). One thread per step; about
# 15 minutes on a free core. Needs build/release/vidax and build/vidax-tiny-score/score_clip.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 WORK OUT LAYOUT [--raw] [--set KEY=VALUE ...]" >&2; exit 2; }
work=$(realpath -m "$1") out=$(realpath -m "$2") layout=$3  # before the cd below
shift 3
raw=""
if [ "${1:-}" = "--raw" ]; then raw=--raw; shift; fi
cd "$(dirname "$0")/../.."
[ -f "$work/dit_ckpt.pt" ] || { echo "$0: $work/dit_ckpt.pt: no DiT checkpoint to measure" >&2; exit 1; }
export OMP_NUM_THREADS=1
py=/usr/bin/python3
mkdir -p "$out"
rm -rf "$out/model"
cp "$work/dit_ckpt.pt" "$out/measured_ckpt.pt"
$py research/vidax_tiny/train.py export --from-checkpoint "$out/measured_ckpt.pt" $raw --work "$work" \
    --out "$out/model" --set dit_layout="$layout" "$@" > "$out/export.log" 2>&1 \
    || { cat "$out/export.log" >&2; exit 1; }
cat "$out/export.log"
$py research/vidax_tiny/probe.py x0 "$work" "$out/measured_ckpt.pt" $raw --set dit_layout="$layout" "$@" \
    > "$out/probe.txt"
$py research/vidax_tiny/probe.py words "$work" "$out/measured_ckpt.pt" $raw --set dit_layout="$layout" "$@" \
    > "$out/words.txt"
$py research/vidax_tiny/finish_probe.py --model "$out/model" --layout "$layout" --sigmas 0.5,0.75,0.9 \
    --count 16 --score-clip build/vidax-tiny-score/score_clip > "$out/finish.txt"
build/release/vidax --threads 1 eval --model "$out/model" --json --quiet --no-cache > "$out/eval.json"
build/release/vidax --threads 1 demo --model "$out/model" --strip "$out/strip.png" -o "$out/demo.mp4" \
    > /dev/null
grep "^finished" "$out/finish.txt"
$py -c "import json, sys; d = json.load(open(sys.argv[1])); print('eval overall', d['adherence'], d['adherence_by_attribute'])" \
    "$out/eval.json"
