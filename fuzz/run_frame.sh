#!/bin/bash
# Builds the supervisor<->worker frame decoder fuzzer with clang (libFuzzer,
# ASan, UBSan) outside Bazel and runs it in one process (one core).
#
#   fuzz/run_frame.sh [seconds]    default 60
#
# Environment: FUZZ_OUT (default /tmp/sluice-frame-fuzz) receives the
# generated protobuf code, the binary, the corpus, crash artifacts and
# fuzz.log; CXX (default clang++). Exit status is non-zero on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
out="${FUZZ_OUT:-/tmp/sluice-frame-fuzz}"
cxx="${CXX:-clang++}"
mkdir -p "$out/gen" "$out/corpus"

protoc --cpp_out="$out/gen" proto/sluice/v1/sluice.proto proto/sluice/worker/v1/worker.proto
absl_libs=(-labsl_statusor -labsl_status -labsl_cord -labsl_cordz_info
  -labsl_cord_internal -labsl_cordz_functions -labsl_cordz_handle
  -labsl_str_format_internal -labsl_synchronization -labsl_graphcycles_internal
  -labsl_symbolize -labsl_stacktrace -labsl_debugging_internal
  -labsl_demangle_internal -labsl_hash -labsl_city -labsl_low_level_hash
  -labsl_raw_hash_set -labsl_strings -labsl_strings_internal -labsl_int128
  -labsl_throw_delegate -labsl_time -labsl_civil_time -labsl_time_zone
  -labsl_malloc_internal -labsl_base -labsl_spinlock_wait
  -labsl_raw_logging_internal -labsl_log_severity -lpthread)

echo "building $out/frame_fuzzer"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. -I"$out/gen" fuzz/frame_fuzzer.cc worker/channel.cc \
  "$out/gen/proto/sluice/v1/sluice.pb.cc" "$out/gen/proto/sluice/worker/v1/worker.pb.cc" \
  -o "$out/frame_fuzzer" -lprotobuf "${absl_libs[@]}"

echo "fuzzing for ${secs}s on one core; log: $out/fuzz.log"
set +e
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
"$out/frame_fuzzer" "$out/corpus" -max_total_time="$secs" -max_len=4096 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/" 2>&1 | tee "$out/fuzz.log" | grep -E "DONE|ERROR|SUMMARY|stat::" || true
rc=${PIPESTATUS[0]}
set -e
crashes=$(find "$out" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
  -o -name 'oom-*' \) | wc -l)
execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$out/fuzz.log" | grep -oE "[0-9]+$" || echo "?")
echo "frame fuzz: executions=$execs crashes=$crashes exit=$rc"
exit "$rc"
