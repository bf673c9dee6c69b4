#!/usr/bin/env bash
# Kept for the documented command: fuzzes the safetensors parser (see scripts/fuzz.sh).
exec "$(dirname "$0")/fuzz.sh" safetensors "$@"
