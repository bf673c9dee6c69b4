#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer + ASan + UBSan) and fuzzes one parser for a bounded
# time: `safetensors` (the safetensors header/offset validation) or `pth` (zip archive +
# restricted unpickler + tensor checks) or `image` (the PNG / JPEG / WebP decoders of
# image-to-video) or `serve` (the request bodies and job records of `vidax serve`) or `plan` (the
# planner's topology and plan files). Usage: scripts/fuzz.sh safetensors|pth|image|serve|plan [seconds=60]
# A crash leaves its reproducer in build/fuzz/artifacts/; replay it with
#   build/fuzz/fuzz/<target>_fuzz build/fuzz/artifacts/<crash-file>
set -euo pipefail

target="${1:-}"
seconds="${2:-60}"
case "$target" in
  safetensors)
    label="safetensors"; exe="safetensors_fuzz"; dict="fuzz/safetensors.dict"
    seed_files=(fuzz/corpus/safetensors/*); seed_exe="${exe}_seeds" ;;
  pth)
    label=".pth"; exe="torch_pickle_fuzz"; dict="fuzz/pth.dict"
    seed_files=(tests/data/pth/*.pth); seed_exe="${exe}_seeds" ;;  # real torch.save files
  image)
    label="image"; exe="image_fuzz"; dict="fuzz/image.dict"
    seed_files=(tests/data/wan_i2v/images/*); seed_exe="" ;;  # PIL-written PNG / JPEG / WebP
  serve)
    label="serve request"; exe="serve_request_fuzz"; dict="fuzz/serve_request.dict"
    seed_files=(fuzz/corpus/serve_request/*); seed_exe="" ;;  # request bodies, a job record
  plan)
    label="plan file"; exe="plan_fuzz"; dict="fuzz/plan.dict"
    seed_files=(fuzz/corpus/plan/*); seed_exe="" ;;  # two topologies, a plan
  *)
    echo "usage: $0 safetensors|pth|image|serve|plan [seconds > 0]" >&2
    exit 2 ;;
esac
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 safetensors|pth|image|serve|plan [seconds > 0]" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="build/fuzz"

cmake --preset fuzz >/dev/null
cmake --build "$build" --target "$exe" ${seed_exe:+"$seed_exe"} -j "${JOBS:-2}"

# Working corpus: the committed hand-made seeds plus seeds generated with the real writer. It is
# kept between runs so coverage accumulates.
corpus="$build/corpus/$target"
artifacts="$build/artifacts"
mkdir -p "$corpus" "$artifacts"
cp "${seed_files[@]}" "$corpus"/
if [[ -n "$seed_exe" ]]; then "$build/fuzz/$seed_exe" "$corpus"; fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

status=0
"$build/fuzz/$exe" \
  -max_total_time="$seconds" \
  -max_len=4096 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict="$dict" \
  -artifact_prefix="$artifacts/" \
  -print_final_stats=1 \
  "$corpus" || status=$?

if [[ $status -ne 0 ]]; then
  echo "$label fuzzing FAILED (exit $status); reproducers in $artifacts/" >&2
  exit "$status"
fi
echo "$label fuzzing: no findings in ${seconds}s"
