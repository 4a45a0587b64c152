#!/bin/bash
# Builds one libFuzzer target with clang (ASan, UBSan, -O1, line tables)
# outside Bazel, from the repository's sources.
#
#   fuzz/build.sh gguf|frame|tokenizer OUTDIR   writes OUTDIR/<target>_fuzzer
#
# frame also writes the generated protobuf code under OUTDIR/gen. CXX
# (default clang++) picks the compiler. Used by fuzz/run.sh (one core, here)
# and fuzz/bundle.sh (the three targets with their libraries, for a larger
# machine without clang).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: fuzz/build.sh gguf|frame|tokenizer OUTDIR}"
out="${2:?usage: fuzz/build.sh gguf|frame|tokenizer OUTDIR}"
cxx="${CXX:-clang++}"
mkdir -p "$out"

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
      loader/tensor_table.cc format/ggml_type.cc)
    ;;
  frame)
    mkdir -p "$out/gen"
    protoc --cpp_out="$out/gen" proto/sluice/v1/sluice.proto proto/sluice/worker/v1/worker.proto
    inputs=(-I"$out/gen" fuzz/frame_fuzzer.cc wire/channel.cc
      "$out/gen/proto/sluice/v1/sluice.pb.cc" "$out/gen/proto/sluice/worker/v1/worker.pb.cc"
      -lprotobuf)
    ;;
  tokenizer)
    inputs=(fuzz/tokenizer_fuzzer.cc model/tokenizer.cc model/tokenizer_unicode.cc model/utf8.cc)
    ;;
  *) echo "fuzz/build.sh: unknown target '$target' (gguf, frame, tokenizer)" >&2; exit 2 ;;
esac

# -gline-tables-only: enough for a symbolized report (here, from the same
# binary), at a fraction of full debug info's size in the bundle.
"$cxx" -std=c++20 -O1 -gline-tables-only -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. "${inputs[@]}" -o "$out/${target}_fuzzer" "${absl_libs[@]}"
