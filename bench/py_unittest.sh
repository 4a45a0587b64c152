#!/usr/bin/env bash
# Runs a python3 unittest file under Bazel (the system interpreter: the GPU
# machine and the tests use the standard library only).
set -euo pipefail
exec python3 "$1"
