#!/bin/sh
# Generates a few clips with vidax-tiny and scores them with the synthetic world's analyzer
# (a stop-gap until `vidax eval`). Run from the repository root after building vidax (release).
# Usage: research/vidax_tiny/score.sh [OUTDIR] [STEPS]
set -e
out=${1:-build/vidax-tiny-score}
steps=${2:-20}
mkdir -p "$out"
b=build/release
g++ -std=c++20 -O2 -fopenmp -Isrc research/vidax_tiny/score_clip.cpp -o "$out/score_clip" \
  $b/libvidax_synth.a $b/libvidax_io.a $b/libvidax_core.a -lhwy -lz
i=0
while read -r prompt; do
  i=$((i + 1))
  $b/vidax generate --model models/vidax-tiny --prompt "$prompt" --negative-prompt "" \
    --size 256x256 --frames 17 --steps "$steps" --seed "$i" --no-hash -o "$out/clip$i.mp4" >/dev/null 2>&1 </dev/null
  ffmpeg -nostdin -loglevel error -y -i "$out/clip$i.mp4" -f rawvideo -pix_fmt rgb24 "$out/clip$i.rgb"
  printf '%s\n  ' "$prompt"
  "$out/score_clip" "$out/clip$i.rgb" 256 256 "$prompt"
done <<'PROMPTS'
a red square moves to the left on a dark blue background
a yellow circle moves to the right on a black background
a green triangle moves up on a gray background
a white circle grows on a dark red background
a blue square moves down on a dark green background
an orange circle bounces on a black background
a purple triangle shrinks on a gray background
a cyan square stays still on a dark blue background
PROMPTS
