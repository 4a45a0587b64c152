#!/usr/bin/env bash
# One archive for the GPU machine's `carry` (64 MiB with the tree): every
# sm90 test and the bench binaries (generate, mkmodel, batch_decode,
# cuda_matmul_bench; with
# --daemon also sluiced, sluice-worker and sluicectl), their shared
# libraries, the goldens but their q8_0 models and split shards, and the
# deepseek2 goldens. Usage (here, Bazel built):
#   tools/gpu_carry.sh OUT_DIR [--daemon]
# writes OUT_DIR/all.txz (about 38 MB without the daemon, 2026-12-06).
# There:
#   mkdir -p /tmp/x && xz -dc OUT_DIR/all.txz | tar xf - -C /tmp/x
#   /tmp/x/b/run.sh /tmp/x/b/bin /tmp/x/goldens /tmp/x/gd2 --gtest_filter=-*q8_0*
# (the q8_0 goldens are not carried: their cases fail NOT_FOUND without the
# filter)
# and the binaries in /tmp/x/b/bin with LD_LIBRARY_PATH=/tmp/x/b/lib.
#
# The three largest binaries (each holds the same CUDA kernels) go first
# and side by side into one xz stream of a 64 MiB dictionary (-9, one
# thread), which keeps one copy of what they share: 45 MB with the daemon
# against 53 MB for `xz -T2 -7`.
set -euo pipefail
out="$1"
daemon=0
[ "${2:-}" = "--daemon" ] && daemon=1
here="$(cd "$(dirname "$0")/.." && pwd)"
goldens="${SLUICE_GOLDENS:-$here/../shared/goldens}"
goldens_ds2="${SLUICE_GOLDENS_DEEPSEEK2:-$here/../shared/goldens-deepseek2}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cd "$here"
bins=(bazel-bin/tools/generate bazel-bin/tools/mkmodel bazel-bin/tools/batch_decode
      bazel-bin/bench/cuda_matmul_bench)
targets=(//tools:generate //tools:mkmodel //tools:batch_decode //bench:cuda_matmul_bench)
if [ "$daemon" = 1 ]; then
  bins+=(bazel-bin/daemon/sluiced bazel-bin/worker/sluice-worker bazel-bin/clients/sluicectl)
  targets+=(//daemon:sluiced //worker:sluice-worker //clients:sluicectl)
fi
bazel build "${targets[@]}" > /dev/null
tools/gpu_tests.sh "$stage/b" > /dev/null
tools/gpu_bundle.sh "$stage/b" "${bins[@]}" > /dev/null
mkdir -p "$stage/goldens"
(cd "$goldens" && tar cf - --exclude='*q8_0*' --exclude=split .) | tar xf - -C "$stage/goldens"
cp -r "$goldens_ds2" "$stage/gd2"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$stage"
big=()
for b in generate batch_decode sluice-worker; do
  [ -f "b/bin/$b" ] && big+=("b/bin/$b")
done
{
  printf '%s\n' "${big[@]}"
  find b gd2 goldens -type f | grep -v -x -F -f <(printf '%s\n' "${big[@]}")
} > list
tar cf - -T list | xz -T1 -9 > "$out/all.txz"
echo "wrote $out/all.txz ($(du -h "$out/all.txz" | cut -f1))"
