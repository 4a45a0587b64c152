#!/bin/bash
# Builds one fuzz target with clang (libFuzzer, ASan, UBSan) outside Bazel and
# runs it in one process (one core) on a working corpus.
#
#   fuzz/run.sh [seconds] [gguf|frame|tokenizer]   defaults 60, gguf
#   make fuzz                                       each target for 300 s
#
# gguf: the GGUF parser (seeded from fuzz/corpus); frame: the
# supervisor<->worker frame decoder; tokenizer: the byte-level BPE tokenizer.
# Environment: FUZZ_OUT (default /tmp/sluice-<target>-fuzz) receives the
# binary (and, for frame, the generated protobuf code), the growing corpus,
# crash artifacts and fuzz.log; CXX (default clang++). Exit status is non-zero
# when the fuzzer found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
target="${2:-gguf}"
out="${FUZZ_OUT:-/tmp/sluice-$target-fuzz}"
cxx="${CXX:-clang++}"
mkdir -p "$out/corpus"

absl_libs=(-labsl_statusor -labsl_status -labsl_cord -labsl_cordz_info
  -labsl_cord_internal -labsl_cordz_functions -labsl_cordz_handle
  -labsl_str_format_internal -labsl_synchronization -labsl_graphcycles_internal
  -labsl_symbolize -labsl_stacktrace -labsl_debugging_internal
  -labsl_demangle_internal -labsl_hash -labsl_city -labsl_low_level_hash
  -labsl_raw_hash_set -labsl_strings -labsl_strings_internal -labsl_int128
  -labsl_throw_delegate -labsl_time -labsl_civil_time -labsl_time_zone
  -labsl_malloc_internal -labsl_base -labsl_spinlock_wait
  -labsl_raw_logging_internal -labsl_log_severity -lpthread)
case "$target" in
  gguf)
    inputs=(fuzz/gguf_fuzzer.cc loader/gguf_file.cc loader/gguf_value.cc
      loader/tensor_table.cc loader/ggml_type.cc)
    # The committed seeds stay small; the fuzzer grows its own copy.
    cp -n fuzz/corpus/*.gguf "$out/corpus/" 2>/dev/null || true
    ;;
  frame)
    mkdir -p "$out/gen"
    protoc --cpp_out="$out/gen" proto/sluice/v1/sluice.proto proto/sluice/worker/v1/worker.proto
    inputs=(-I"$out/gen" fuzz/frame_fuzzer.cc worker/channel.cc
      "$out/gen/proto/sluice/v1/sluice.pb.cc" "$out/gen/proto/sluice/worker/v1/worker.pb.cc"
      -lprotobuf)
    ;;
  tokenizer)
    inputs=(fuzz/tokenizer_fuzzer.cc model/tokenizer.cc model/tokenizer_unicode.cc model/utf8.cc)
    ;;
  *) echo "fuzz/run.sh: unknown target '$target' (gguf, frame, tokenizer)" >&2; exit 2 ;;
esac

echo "building $out/${target}_fuzzer"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. "${inputs[@]}" -o "$out/${target}_fuzzer" "${absl_libs[@]}"

echo "fuzzing ${target} for ${secs}s on one core; log: $out/fuzz.log"
set +e
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
"$out/${target}_fuzzer" "$out/corpus" -max_total_time="$secs" -max_len=4096 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/" 2>&1 | tee "$out/fuzz.log" | grep -E "DONE|ERROR|SUMMARY|stat::" || true
rc=${PIPESTATUS[0]}
set -e
crashes=$(find "$out" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
  -o -name 'oom-*' \) | wc -l)
execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$out/fuzz.log" | grep -oE "[0-9]+$" || echo "?")
echo "$target fuzz: executions=$execs crashes=$crashes exit=$rc"
exit "$rc"
