#!/bin/bash
# Builds one fuzz target with clang (libFuzzer, ASan, UBSan; fuzz/build.sh)
# and runs it in one process (one core) on a working corpus.
#
#   fuzz/run.sh [seconds] [gguf|frame|tokenizer]   defaults 60, gguf
#
# For the long runs on many cores (10 million executions per target) see
# fuzz/bundle.sh and fuzz/run_all.sh; make fuzz runs the three targets for a
# short while each through run_all.sh's settings here.
# gguf: the GGUF parser (seeds fuzz/corpus); frame: the supervisor<->worker
# frame decoder (fuzz/corpus_frame); tokenizer: the byte-level BPE tokenizer
# (fuzz/corpus_tokenizer). The -max_len of each is explained in run_all.sh.
# Environment: FUZZ_OUT (default /tmp/sluice-<target>-fuzz) receives the
# binary, the growing corpus, crash artifacts and fuzz.log; CXX (default
# clang++). Exit status is non-zero when the fuzzer found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
target="${2:-gguf}"
out="${FUZZ_OUT:-/tmp/sluice-$target-fuzz}"
case "$target" in
  gguf) seeds=fuzz/corpus; max_len=4096 ;;
  frame) seeds=fuzz/corpus_frame; max_len=4096 ;;
  tokenizer) seeds=fuzz/corpus_tokenizer; max_len=512 ;;
  *) echo "fuzz/run.sh: unknown target '$target' (gguf, frame, tokenizer)" >&2; exit 2 ;;
esac
mkdir -p "$out/corpus"
# The committed seeds stay small; the fuzzer grows its own copy.
cp -n "$seeds"/* "$out/corpus/" 2>/dev/null || true

echo "building $out/${target}_fuzzer"
fuzz/build.sh "$target" "$out"

echo "fuzzing ${target} for ${secs}s on one core; log: $out/fuzz.log"
set +e
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
"$out/${target}_fuzzer" "$out/corpus" -max_total_time="$secs" -max_len="$max_len" \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/" 2>&1 | tee "$out/fuzz.log" | grep -E "DONE|ERROR|SUMMARY|stat::" || true
rc=${PIPESTATUS[0]}
set -e
crashes=$(find "$out" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
  -o -name 'oom-*' \) | wc -l)
execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$out/fuzz.log" | grep -oE "[0-9]+$" || echo "?")
echo "$target fuzz: executions=$execs crashes=$crashes exit=$rc"
exit "$rc"
