#!/usr/bin/env bash
# The GPU tests for the GPU machine, which has no Bazel: builds every sm90
# test here, bundles them with the libraries they need (tools/gpu_bundle.sh)
# and the runner tools/gpu_tests_run.sh, into OUT_DIR. Usage:
#   tools/gpu_tests.sh OUT_DIR
# There (the goldens travel separately; the q8_0 ones are large):
#   OUT_DIR/run.sh OUT_DIR/bin GOLDENS GOLDENS_DEEPSEEK2 [gtest flags]
# prints each test's PASSED / FAILED / SKIPPED line and a summary.
set -euo pipefail
out="$1"
cd "$(dirname "$0")/.."
mapfile -t targets < <(bazel query 'attr(name, "_sm90_test$", tests(//...))' 2>/dev/null)
bazel build "${targets[@]}"
bins=()
for t in "${targets[@]}"; do
  pkg="${t#//}"; pkg="${pkg%%:*}"; name="${t##*:}"
  bins+=("bazel-bin/$pkg/$name")
done
tools/gpu_bundle.sh "$out" "${bins[@]}"
cp -f tools/gpu_tests_run.sh "$out/run.sh"
chmod +x "$out/run.sh"
echo "gpu_tests: ${#bins[@]} tests in $out/bin; there: $out/run.sh $out/bin GOLDENS GOLDENS_DEEPSEEK2"
