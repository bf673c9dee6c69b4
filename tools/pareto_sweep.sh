#!/usr/bin/env bash
# Speed/quality (Pareto) table of the sparse-attention policies on a model (vidax-tiny by
# default) with `vidax eval`: the dense full-step configuration is the reference; every policy
# runs over a threshold sweep (svg density, spade top-p, west budget, window size), once with
# --attention-metrics (density, attention error and recall, PSNR/SSIM against dense, adherence)
# and once without (its real seconds per step and attention share; the metrics run also computes
# dense attention beside every call). One markdown row per configuration on stdout; every JSON
# report goes to OUT/. One thread per vidax process (two threads were up to 12x slower on the
# shared 2-core machine).
#
# WEST needs a prior: it is calibrated first with `vidax calibrate --synth N` on synthetic
# captions from seeds 8,000,000 up, never the eval suite's prompts (scene seeds 7,000,000+), at
# the eval's size, frames, steps and precision (vidax-tiny's defaults unless --calib-args says
# otherwise). --prior FILE reuses one.
#
# usage: tools/pareto_sweep.sh [--vidax build/release/vidax] [--model DIR] [--out DIR]
#          [--suite default|ci] [--seeds N] [--cache DIR] [--calib-synth 8]
#          [--calib-args "--size 256x256 --frames 17 --steps 20 --precision fp32"]
#          [--prior FILE] [--configs FILE] [--no-speed]
#   --configs FILE: one --attention spec per line ('#' comments; PRIOR stands for the prior's
#   path), instead of the built-in sweep below.
# Full default suite (48 clips) with the built-in 14 configurations: about 14 x 2 x 4-5 min of
# CPU on vidax-tiny (1 head, 1,280 tokens); --suite ci (3 clips) for a quick check.
set -euo pipefail
cd "$(dirname "$0")/.."
VIDAX=build/release/vidax
MODEL=models/vidax-tiny
OUT=$(mktemp -d /tmp/vidax-pareto.XXXXXX)
SUITE=default
SEEDS=
CACHE=
CALIB_SYNTH=8
CALIB_ARGS="--size 256x256 --frames 17 --steps 20 --precision fp32"
PRIOR=
CONFIGS=
SPEED=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --vidax) VIDAX=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --suite) SUITE=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --calib-synth) CALIB_SYNTH=$2; shift 2 ;;
    --calib-args) CALIB_ARGS=$2; shift 2 ;;
    --prior) PRIOR=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --no-speed) SPEED=0; shift ;;
    *) echo "pareto_sweep.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
[[ -n $CACHE ]] || CACHE=$OUT/cache
EVAL=("$VIDAX" --threads 1 eval --model "$MODEL" --suite "$SUITE" --cache "$CACHE" --json --quiet)
[[ -n $SEEDS ]] && EVAL+=(--seeds "$SEEDS")
# vidax-tiny was trained with an empty negative prompt (eval's default for it too).
NEG=(--negative-prompt "")

if [[ -z $PRIOR ]]; then
  PRIOR=$OUT/prior.west
  echo "calibrating WEST: $CALIB_SYNTH synthetic captions (seeds 8,000,000+) -> $PRIOR" >&2
  # shellcheck disable=SC2086  # CALIB_ARGS is a list of flags
  "$VIDAX" --threads 1 calibrate --model "$MODEL" --synth "$CALIB_SYNTH" $CALIB_ARGS "${NEG[@]}" \
    -o "$PRIOR" --json > "$OUT/calibrate.json"
fi

# Thresholds for vidax-tiny's 256x256x17 grid (5 x 16 x 16 = 1,280 tokens): window sizes in
# 1x8x8 tiles (a 5,16,16 window would be the whole grid), svg on 64-token tiles (with 128 the
# first-frame anchor and diagonal alone exceed low densities), spade top-p, WEST's per-row budget
# and its global density mode.
default_configs() {
  cat <<LIST
window:3,8,8:tile=1,8,8
window:5,8,8:tile=1,8,8
window:3,16,16:tile=1,8,8
svg:density=0.15,block=64
svg:density=0.3,block=64
svg:density=0.5,block=64
spade:topp=0.5
spade:topp=0.7
spade:topp=0.9
spade:topp=0.97
west:PRIOR:density=0.25
west:PRIOR:density=0.5
west:PRIOR:budget=0.2
west:PRIOR:budget=0.05
LIST
}
if [[ -n $CONFIGS ]]; then
  mapfile -t SPECS < <(grep -v '^[[:space:]]*#' "$CONFIGS" | grep -v '^[[:space:]]*$')
else
  mapfile -t SPECS < <(default_configs)
fi

echo "dense reference" >&2
"${EVAL[@]}" > "$OUT/dense.json"
i=0
for spec in "${SPECS[@]}"; do
  spec=${spec//PRIOR/$PRIOR}
  i=$((i + 1))
  echo "[$i/${#SPECS[@]}] $spec" >&2
  "${EVAL[@]}" --config "attention=$spec" --attention-metrics > "$OUT/metrics_$i.json"
  if [[ $SPEED == 1 ]]; then
    # Its clips are in the cache now, but eval times the configuration by generating it again.
    "${EVAL[@]}" --config "attention=$spec" > "$OUT/speed_$i.json"
  fi
done

/usr/bin/python3 - "$OUT" "${#SPECS[@]}" "$PRIOR" <<'PY'
import json, os, sys
out, n, prior = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dense = json.load(open(os.path.join(out, "dense.json")))
def f(x, fmt):
    return "-" if x is None else format(x, fmt)
print(f"model {dense['model']}, suite {dense['suite']} ({dense['clips']} clips), "
      f"config {dense['config']['canonical']}")
print()
print("| `--attention` | density | attention rel. L2 | recall | PSNR mean / min (dB) | SSIM mean | adherence | temporal ratio | s/step | attention share |")
print("|---|---|---|---|---|---|---|---|---|---|")
print(f"| dense (reference) | 1 | 0 | 1 | - | - | {f(dense['adherence'], '.3f')} | 1 | "
      f"{f(dense['seconds_per_step'], '.3f')} | {f(dense['attention_share'], '.3f')} |")
for i in range(1, n + 1):
    m = json.load(open(os.path.join(out, f"metrics_{i}.json")))
    sp_path = os.path.join(out, f"speed_{i}.json")
    s = json.load(open(sp_path)) if os.path.exists(sp_path) else None
    am = m["attention_metrics"] or {}
    spec = m["config"]["canonical"].split("attention=", 1)[1].replace(prior, "PRIOR")
    print(f"| `{spec}` | {f(am.get('density_mean'), '.3f')} | {f(am.get('rel_l2_mean'), '.3f')} | "
          f"{f(am.get('recall_mean'), '.3f')} | {f(m['psnr_mean'], '.2f')} / {f(m['psnr_min'], '.2f')} | "
          f"{f(m['ssim_mean'], '.3f')} | {f(m['adherence'], '.3f')} | {f(m['temporal_ratio'], '.2f')} | "
          f"{f(s['seconds_per_step'] if s else None, '.3f')} | {f(s['attention_share'] if s else None, '.3f')} |")
PY
echo "reports: $OUT" >&2
