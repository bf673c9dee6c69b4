#!/usr/bin/env bash
# Quality against work for the step methods on a model (vidax-tiny by default) with `vidax eval`:
# every configuration is compared with the dense default run (the reference: 20 UniPC steps at
# 256x256x17 for vidax-tiny) on the suite, next to plain step reduction at about the same work
# (steps=10 and 5), sparse attention alone and combined. MagCache uses a table calibrated on this
# model first (`vidax calibrate --method magcache` on synthetic captions from seed 8,000,000, never
# the suite's); TeaCache uses its polynomial fitted the same way (`vidax calibrate --method
# teacache`). DVG and Kaleido rows follow (Kaleido runs its emulation at fp32: its work fraction is
# what the AMX delta path would do, its wall clock is not a saving).
# HSA needs the Euler sampler: its rows come with dense Euler and Euler step reduction. One markdown
# row per configuration on stdout (work fraction from the run, denoising seconds per clip and
# their fraction of the dense run's); every JSON report goes to OUT/, and OUT/points.tsv feeds
# tools/pareto_plot.py. Configurations run two at a time, one thread each.
#
# usage: tools/step_methods_sweep.sh [--vidax build/release/vidax] [--model DIR] [--out DIR]
#          [--suite default|ci] [--calib-synth 8] [--skip-existing]
# --skip-existing keeps the reports already in OUT (configuration i's report is OUT/i.json; new
# configurations are appended at the end, so an older OUT keeps its numbering).
set -euo pipefail
cd "$(dirname "$0")/.."
VIDAX=build/release/vidax
MODEL=models/vidax-tiny
OUT=$(mktemp -d /tmp/vidax-steps.XXXXXX)
SUITE=default
CALIB_SYNTH=8
SKIP_EXISTING=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --vidax) VIDAX=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --suite) SUITE=$2; shift 2 ;;
    --calib-synth) CALIB_SYNTH=$2; shift 2 ;;
    --skip-existing) SKIP_EXISTING=1; shift ;;
    *) echo "step_methods_sweep.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
CACHE=$OUT/cache
EVAL=("$VIDAX" --threads 1 eval --model "$MODEL" --suite "$SUITE" --cache "$CACHE" --json --quiet)
NEG=(--negative-prompt "")  # vidax-tiny was trained with an empty negative prompt

TABLE=$OUT/magcache.json
echo "calibrating MagCache: $CALIB_SYNTH synthetic captions -> $TABLE" >&2
"$VIDAX" --threads 2 calibrate --method magcache --model "$MODEL" --synth "$CALIB_SYNTH" \
  --size 256x256 --frames 17 --steps 20 --precision fp32 "${NEG[@]}" -o "$TABLE" > /dev/null

TEA=$OUT/teacache.json
echo "calibrating TeaCache: $CALIB_SYNTH synthetic captions -> $TEA" >&2
"$VIDAX" --threads 2 calibrate --method teacache --model "$MODEL" --synth "$CALIB_SYNTH" \
  --size 256x256 --frames 17 --steps 20 --precision fp32 "${NEG[@]}" -o "$TEA" > /dev/null
# Thresholds that skip about half and three quarters of the calls with this fit on vidax-tiny
# (TeaCache's e-mode decisions depend only on the timesteps, so they hold for every prompt).
TEA_HALF=${TEA_HALF:-0.1}
TEA_QUARTER=${TEA_QUARTER:-0.3}

# name|--config
CONFIGS=(
  "dense|default"
  "steps=10|steps=10"
  "steps=5|steps=5"
  "magcache ~50%|accel=magcache:ratios=$TABLE,thresh=0.06,k=2"
  "magcache ~25%|accel=magcache:ratios=$TABLE,thresh=1,k=20"
  "easycache 0.2|accel=easycache:thresh=0.2,ret=2"
  "easycache 1|accel=easycache:thresh=1,ret=2"
  "euler dense|sampler=euler"
  "euler steps=10|sampler=euler,steps=10"
  "euler steps=5|sampler=euler,steps=5"
  "hsa 0.4 (euler)|sampler=euler,accel=hsa:budget=0.4,warmup=2,sync=none"
  "hsa 0.12 (euler)|sampler=euler,accel=hsa:budget=0.12,warmup=2,sync=none"
  "svg 0.3|attention=svg:density=0.3,block=64"
  "magcache ~50% + svg 0.3|accel=magcache:ratios=$TABLE,thresh=0.06,k=2,attention=svg:density=0.3,block=64"
  "teacache ~50%|accel=teacache:table=$TEA,thresh=$TEA_HALF"
  "teacache ~25%|accel=teacache:table=$TEA,thresh=$TEA_QUARTER"
  "dvg joint 0.5|accel=dvg:mode=joint,switch=0.5"
  "dvg joint 0.8|accel=dvg:mode=joint,switch=0.8"
  "dvg auto|accel=dvg"
  "kaleido 1|accel=kaleido:thresh=1"
  "kaleido 4|accel=kaleido:thresh=4"
  "steps=11|steps=11"
  "kaleido 0.2|accel=kaleido:thresh=0.2"
)

# The reference clips go to the cache first.
[[ $SKIP_EXISTING == 1 && -s $OUT/0.json ]] || "${EVAL[@]}" > "$OUT/0.json"
# A configuration that fails leaves its report empty and the row says so; the others go on.
run_one() {
  local i=$1 spec=$2
  if [[ $SKIP_EXISTING == 1 && -s $OUT/$i.json ]]; then return; fi
  "${EVAL[@]}" --config "$spec" > "$OUT/$i.json" 2> "$OUT/$i.err" || true
}
pids=()
for i in "${!CONFIGS[@]}"; do
  spec=${CONFIGS[$i]#*|}
  echo "[$((i + 1))/${#CONFIGS[@]}] $spec" >&2
  run_one "$i" "$spec" &
  pids+=($!)
  if (( ${#pids[@]} == 2 )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait

/usr/bin/python3 - "$OUT" "${CONFIGS[@]}" <<'PY'
import json, os, sys
out, configs = sys.argv[1], sys.argv[2:]
def f(x, fmt):
    return "-" if x is None else format(x, fmt)
rows = []
for i, c in enumerate(configs):
    name = c.split("|", 1)[0]
    try:
        r = json.load(open(os.path.join(out, f"{i}.json")))
    except ValueError:
        print(f"{name}: FAILED ({open(os.path.join(out, f'{i}.err')).read().strip()})",
              file=sys.stderr)
        continue
    steps = r["config"]["canonical"].split("steps=")[1].split(",")[0]
    denoise = r["seconds_per_step"] * int(steps)
    rows.append((name, r, denoise))
dense = rows[0][2]
ref_steps = int(rows[0][1]["config"]["canonical"].split("steps=")[1].split(",")[0])
print(f"model {rows[0][1]['model']}, suite {rows[0][1]['suite']} ({rows[0][1]['clips']} clips), "
      f"reference {rows[0][1]['config']['canonical']}")
print()
print("| configuration | work | denoise s/clip | wall (of dense) | PSNR mean / min (dB) | SSIM mean | adherence |")
print("|---|---|---|---|---|---|---|")
with open(os.path.join(out, "points.tsv"), "w") as tsv:
    for name, r, denoise in rows:
        steps = int(r["config"]["canonical"].split("steps=")[1].split(",")[0])
        work = r.get("work_fraction", 1.0) * steps / ref_steps  # of the reference's work
        print(f"| {name} | {work:.2f} | {denoise:.2f} | {denoise / dense:.2f} | "
              f"{f(r['psnr_mean'], '.2f')} / {f(r['psnr_min'], '.2f')} | {f(r['ssim_mean'], '.3f')} | "
              f"{f(r['adherence'], '.3f')} |")
        if r["psnr_mean"] is not None:
            tsv.write(f"{name}\t{work:.4f}\t{r['psnr_mean']:.4f}\t{r['ssim_mean']:.4f}\n")
PY
echo "reports: $OUT" >&2
