#!/usr/bin/env bash
# Runs the whole Bazel test suite and ends with one summary line,
# "N passed, N failed, N skipped", counted per test target.
# Usage: tests/run_all.sh BAZEL [bazel flags...]
set -uo pipefail
bazel_bin="$1"; shift
# The official openai client for tests/e2e_http_test.cc (npm, once; the test
# says what is missing if this fails).
"$(dirname "$0")/openai/install.sh" || echo "run_all.sh: installing the openai npm package failed" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$bazel_bin" test "$@" --test_summary=short //... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log")
skipped=$(grep -cE '^//[^ ]+ +SKIPPED' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build error
echo "$passed passed, $failed failed, $skipped skipped"
exit "$rc"
