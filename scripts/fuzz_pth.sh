#!/usr/bin/env bash
# Kept for the documented command: fuzzes the pth parser (see scripts/fuzz.sh).
exec "$(dirname "$0")/fuzz.sh" pth "$@"
