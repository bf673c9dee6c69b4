#!/usr/bin/env bash
# Regenerates the tiny sentencepiece model used by the tokenizer tests
# (tests/data/tokenizer/spiece.model) and the ids the sentencepiece CLI gives for the test
# sentences (tests/data/tokenizer/expected_ids.tsv, "text<TAB>ids").
# Needs the Debian `sentencepiece` package (spm_train, spm_encode). Special ids as umT5's
# spiece.model: pad 0, </s> 1, <unk> 2, no <s>.
set -euo pipefail
out="$(cd "$(dirname "$0")/.." && pwd)/tests/data/tokenizer"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat > "$work/captions.txt" <<'TEXT'
A cat walks on the grass, realistic style, soft morning light.
Two anthropomorphic cats in comfy boxing gear fight intensely on a spotlighted stage.
A drone shot of a rocky coastline at sunset, waves crashing against the cliffs.
A small boat sails across a calm lake surrounded by snowy mountains.
Close-up of a chef slicing vegetables on a wooden board in a busy kitchen.
A red vintage car drives along a winding road through an autumn forest.
Time-lapse of clouds moving over a city skyline at night, with glowing windows.
A golden retriever puppy runs through a field of yellow flowers.
An astronaut floats inside a space station, Earth visible through the window.
A young woman reads a book in a cozy cafe while rain falls outside.
Slow motion of water droplets splashing into a glass of lemonade.
A panda eats bamboo in a misty forest, cinematic lighting, 4K.
Aerial view of a busy harbor with cranes, cargo ships and containers.
A street musician plays the violin in a snowy square at dusk.
Fireworks explode above a river, reflections shimmer on the water.
Un chat noir dort sur le rebord de la fenêtre au soleil.
Ein Hund spielt im Schnee und fängt einen Ball.
Un niño corre por la playa con una cometa de colores.
一只小猫在草地上玩耍，阳光明媚。
雨の中を歩く人々、ネオンの光が反射する夜の街。
Bright colors, overexposed, static, blurred details, subtitles, style, artwork, painting.
Worst quality, low quality, JPEG compression residue, ugly, incomplete, extra fingers.
Poorly drawn hands, poorly drawn faces, deformed, disfigured, misshapen limbs, fused fingers.
Still picture, messy background, three legs, many people in the background, walking backwards.
A robot "assistant" hands a cup of coffee to a scientist in a lab.
The camera pans left: a market full of fruit, spices & fabrics; people bargain loudly.
A hummingbird hovers near a purple flower, wings a blur (slow motion, 240 fps).
Snow falls on a quiet village; smoke rises from chimneys at 6 a.m.
TEXT

spm_train --input="$work/captions.txt" --model_prefix="$work/spiece" --vocab_size=300 \
  --model_type=unigram --character_coverage=1.0 --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1 \
  --hard_vocab_limit=false --num_threads=1 --minloglevel=2 >/dev/null 2>&1
cp "$work/spiece.model" "$out/spiece.model"

# The cleaned forms of the prompts in tests/models/t5_tokenizer_test.cpp.
cat > "$work/sentences.txt" <<'TEXT'
A cat walks on the grass, realistic style.
Two cats "fight" on a stage & the crowd cheers <loudly>.
Un chat noir dort sur le rebord de la fenêtre.
一只小猫在草地上玩耍。
A robot's cup of coffee, 4K 🚀 café
zzz qqq xylophone
TEXT
spm_encode --model="$out/spiece.model" --output_format=id < "$work/sentences.txt" > "$work/ids.txt"
paste "$work/sentences.txt" "$work/ids.txt" > "$out/expected_ids.tsv"
echo "wrote $out/spiece.model and $out/expected_ids.tsv"
