#!/bin/bash
# Packs the three fuzz targets for a machine without clang (the GPU host:
# Ubuntu 24.04, nothing installable):
#
#   fuzz/bundle.sh OUT     then, there: OUT/run_all.sh [N] [EXECS] [SECONDS]
#
# OUT gets bin/ (gguf, frame and tokenizer fuzzers, built here by
# fuzz/build.sh), lib/ (every shared library they load that a base Ubuntu
# 24.04 lacks: Abseil, protobuf, zlib; glibc, libstdc++ and libgcc_s are
# the host's, which are newer than the ones linked here), corpus/<target>/
# (the seeds) and run_all.sh. It checks that with LD_LIBRARY_PATH=OUT/lib
# every library outside that base resolves into OUT/lib, and prints the size.
# No llvm-symbolizer travels (it needs libLLVM, ~100 MB): a finding's report
# there is unsymbolized; replay the artifact here with the same binary.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: fuzz/bundle.sh OUT}"
mkdir -p "$out/bin" "$out/lib" "$out/corpus"
out="$(cd "$out" && pwd)"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT

for t in gguf frame tokenizer; do
  echo "building ${t}_fuzzer"
  fuzz/build.sh "$t" "$build"
  cp "$build/${t}_fuzzer" "$out/bin/"
done

# The libraries a base Ubuntu 24.04 has (glibc, the GCC runtime) and the
# kernel's vDSO; everything else ldd lists travels.
base='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libstdc\+\+|libgcc_s)\.so'
for b in "$out"/bin/*_fuzzer; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $base ]]; then cp -L "$path" "$out/lib/$name"; fi
done

rm -rf "$out/corpus/gguf" "$out/corpus/frame" "$out/corpus/tokenizer"
mkdir -p "$out/corpus/gguf" "$out/corpus/frame" "$out/corpus/tokenizer"
cp fuzz/corpus/*.gguf "$out/corpus/gguf/"
cp fuzz/corpus_frame/* "$out/corpus/frame/"
cp fuzz/corpus_tokenizer/* "$out/corpus/tokenizer/"
cp fuzz/run_all.sh "$out/"

# Every library outside the base must come from OUT/lib.
bad=0
for b in "$out"/bin/*_fuzzer; do
  while read -r name path; do
    [[ "$name" =~ $base ]] && continue
    if [[ "$path" != "$out/lib/"* ]]; then
      echo "bundle: $(basename "$b") loads $name from $path, not from $out/lib" >&2
      bad=1
    fi
  done < <(LD_LIBRARY_PATH="$out/lib" ldd "$b" | awk '$2 == "=>" {print $1, $3}')
done
[ "$bad" -eq 0 ] || exit 1
echo "bundle $out: $(du -sh --apparent-size "$out" | cut -f1) ($(ls "$out/lib" | wc -l) libraries)"
