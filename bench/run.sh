#!/usr/bin/env bash
# The side-by-side benchmark on the GPU machine: Sluice's expert slot cache at
# arena 100/50/25/10% of expert bytes, and llama.cpp at the matching
# placements, on the same mkmodel files, in one run. Writes OUT/results.json;
# bench/report.py turns it into a Markdown table and a PNG (run that here).
#
# Build here, carry, run there (docs/BENCHMARKS.md, "How to run"):
#   bazel build -c opt //tools:generate //tools:mkmodel
#   tools/gpu_bundle.sh bundle bazel-bin/tools/generate bazel-bin/tools/mkmodel
#   bench/run.sh --out "$OUT/bench" --bundle bundle --llama llama \
#       --shapes bench35,bench397 --locality 0,0.2
# Flags: python3 bench/harness.py --help. The GGUF files go to --models
# (/tmp/sluice-bench-models) and are reused by later calls with the same
# flags, so one machine can split the work over several commands (--shapes,
# --locality, --only sluice|llama) and report.py merges their results.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bundle="bundle"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--bundle" ] && bundle="${args[$((i + 1))]}"
done
# The bundle's libraries (tools/gpu_bundle.sh) for generate and mkmodel.
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec python3 "$here/harness.py" "$@"
