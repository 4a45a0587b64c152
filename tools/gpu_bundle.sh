#!/usr/bin/env bash
# Copies built binaries and the shared libraries they need that an Ubuntu
# CUDA image lacks (Debian's Abseil, gRPC, protobuf, ...) into one folder, for
# running on the GPU machine, which has no Bazel. Usage:
#   tools/gpu_bundle.sh OUT_DIR bazel-bin/tools/cuda_probe [more binaries]
#   tools/gpu_bundle.sh OUT_DIR    (the tools below, built with CUDA:
#     bazel build //tools:cuda_probe //tools:generate //tools:mkmodel
#       //tools:parity //tools:coldread //tools:batch_decode //daemon:sluiced
#       //worker:sluice-worker //clients:sluicectl; what bench/run.sh,
#       bench/daemon_streams.py and bench/warm_restart.py run)
# On the GPU machine: LD_LIBRARY_PATH=OUT_DIR/lib OUT_DIR/bin/cuda_probe
set -euo pipefail
out="$1"; shift
if [ "$#" -eq 0 ]; then
  set -- bazel-bin/tools/cuda_probe bazel-bin/tools/generate bazel-bin/tools/mkmodel \
    bazel-bin/tools/parity bazel-bin/tools/coldread bazel-bin/tools/batch_decode \
    bazel-bin/daemon/sluiced bazel-bin/worker/sluice-worker bazel-bin/clients/sluicectl
fi
mkdir -p "$out/bin" "$out/lib"
for bin in "$@"; do
  cp -f "$bin" "$out/bin/"
  # libc, libm, libstdc++ (newer there), the CUDA driver, cudart and cuBLASLt
  # come with the target image;
  # everything else the binary links travels with it.
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*) ;;  # the CUDA image has these
      *) cp -fL "$lib" "$out/lib/" ;;
    esac
  done
done
# Symbols are half the bytes and the carry to the GPU machine is 64 MiB.
if command -v strip >/dev/null; then
  chmod -R u+w "$out"
  strip --strip-unneeded "$out"/bin/* "$out"/lib/* 2>/dev/null || true
fi
du -sh "$out"
