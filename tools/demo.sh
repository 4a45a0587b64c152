#!/usr/bin/env bash
# `make demo`: writes the embedded tiny qwen35moe model with mkmodel (once),
# then shows its tensor table with inspect.
# Usage: tools/demo.sh BAZEL [bazel flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel_bin="$1"; shift
"$bazel_bin" build "$@" //tools:mkmodel //tools:inspect
mkdir -p out
model=out/demo-qwen35moe.gguf
if [ ! -f "$model" ]; then
  bazel-bin/tools/mkmodel --arch qwen35moe --out "$model"
fi
bazel-bin/tools/inspect --summary "$model"
