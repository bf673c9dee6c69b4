#!/bin/sh
# Reproduces the shipped vidax-tiny weights (docs/vidax-tiny.md): trains every phase that has no
# result yet in WORK (resumes an interrupted one) and exports to models/vidax-tiny.
# Usage: research/vidax_tiny/train.sh [WORK]   (run from the repository root, after building vidax)
set -e
work=${1:-build/vidax-tiny-work}
export OMP_NUM_THREADS=1
exec /usr/bin/python3 "$(dirname "$0")/train.py" all --work "$work" --out models/vidax-tiny \
  --vidax build/release/vidax
