#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer + ASan + UBSan) and fuzzes the PyTorch .pth reader
# (zip archive + restricted unpickler + tensor checks) for a bounded time.
# Usage: scripts/fuzz_pth.sh [seconds=60]
# Exits non-zero when the fuzzer finds a crash, a sanitizer report, a leak or a timeout; the
# reproducer is left in build/fuzz/artifacts/. Rerun one with:
#   build/fuzz/fuzz/torch_pickle_fuzz build/fuzz/artifacts/<crash-file>
# Environment: JOBS (build parallelism, default 2).
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 [seconds > 0]" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="build/fuzz"

cmake --preset fuzz >/dev/null
cmake --build "$build" --target torch_pickle_fuzz torch_pickle_fuzz_seeds -j "${JOBS:-2}"

# Working corpus: the committed real torch.save files plus archives and bare data.pkl streams
# generated with the real writer. It is kept between runs so coverage accumulates.
corpus="$build/corpus/pth"
artifacts="$build/artifacts"
mkdir -p "$corpus" "$artifacts"
cp tests/data/pth/*.pth "$corpus"/  # real torch.save files
"$build/fuzz/torch_pickle_fuzz_seeds" "$corpus"

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

status=0
"$build/fuzz/torch_pickle_fuzz" \
  -max_total_time="$seconds" \
  -max_len=4096 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict=fuzz/pth.dict \
  -artifact_prefix="$artifacts/" \
  -print_final_stats=1 \
  "$corpus" || status=$?

if [[ $status -ne 0 ]]; then
  echo ".pth fuzzing FAILED (exit $status); reproducers in $artifacts/" >&2
  exit "$status"
fi
echo ".pth fuzzing: no findings in ${seconds}s"
