#!/usr/bin/env bash
# Runs the layering check and the whole Bazel test suite and ends with one
# summary line, "N passed, N failed, N skipped", counted per test target (the
# layering check counts as one).
#
# A target Bazel reports as passed counts as skipped when its test.log holds
# the skip marker of base/testing/skip.h ("SLUICE_SKIPPED: reason") or
# gtest's "[  SKIPPED ]": it did not run everything it holds. The reasons are
# listed above the summary. docs/ARCHITECTURE.md, "Tests that cannot run here".
# Usage: tests/run_all.sh BAZEL [bazel flags...]
set -uo pipefail
bazel_bin="$1"; shift
cd "$(dirname "$0")/.."
# The official openai client for tests/e2e_http_test.cc (npm, once; the test
# says what is missing if this fails).
tests/openai/install.sh || echo "run_all.sh: installing the openai npm package failed" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT

passed=0 failed=0 skipped=0
if tests/layering_check.sh "$bazel_bin"; then
  echo "layering (bazel query)                                                PASSED"
  passed=$((passed + 1))
  layering_rc=0
else
  echo "layering (bazel query)                                                FAILED"
  failed=$((failed + 1))
  layering_rc=1
fi

"$bazel_bin" test "$@" --test_summary=short //... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
testlogs=$("$bazel_bin" info "$@" bazel-testlogs 2>/dev/null)

reasons=()
for target in $(grep -oE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | awk '{print $1}'); do
  test_log="$testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
  why=$(grep -m1 -E '^SLUICE_SKIPPED: |^\[  SKIPPED \] ' "$test_log" 2>/dev/null)
  if [ -n "$why" ]; then
    skipped=$((skipped + 1))
    reasons+=("$target: ${why#SLUICE_SKIPPED: }")
  else
    passed=$((passed + 1))
  fi
done
bazel_failed=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log")
bazel_skipped=$(grep -cE '^//[^ ]+ +SKIPPED' "$log")
failed=$((failed + bazel_failed))
skipped=$((skipped + bazel_skipped))
if [ "$rc" -ne 0 ] && [ "$bazel_failed" -eq 0 ]; then failed=$((failed + 1)); fi  # a build error
if [ "${#reasons[@]}" -gt 0 ]; then
  echo "passed but skipped (in part or whole):"
  printf '  %s\n' "${reasons[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$rc" -eq 0 ]; then rc=$layering_rc; fi
exit "$rc"
