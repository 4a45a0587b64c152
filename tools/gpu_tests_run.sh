#!/usr/bin/env bash
# Runs every *_sm90_test in BIN_DIR (tools/gpu_tests.sh bundles them) with
# the goldens, each under a time limit, and prints one line per test
# ("PASSED", "FAILED (rc N)" with its failing cases, or "SKIPPED" when it
# printed the skip marker of base/testing/skip.h) and then
# "N passed, N failed, N skipped". Exit 1 when any failed. Usage:
#   run.sh BIN_DIR GOLDENS GOLDENS_DEEPSEEK2 [gtest flags...]
# Environment: SM90_TIMEOUT_S (default 300) per test; SM90_LOGS, a folder
# for each test's whole output (default: a temporary one, listed at the end).
set -uo pipefail
bin_dir="$1" goldens="$2" goldens_ds2="$3"
shift 3
lib_dir="$(cd "$bin_dir/.." && pwd)/lib"
export LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SLUICE_GOLDENS="$goldens" SLUICE_GOLDENS_DEEPSEEK2="$goldens_ds2"
logs="${SM90_LOGS:-$(mktemp -d)}"
mkdir -p "$logs"
passed=0 failed=0 skipped=0
for t in "$bin_dir"/*_sm90_test; do
  [ -x "$t" ] || continue
  name="$(basename "$t")"
  start=$(date +%s)
  timeout "${SM90_TIMEOUT_S:-300}" "$t" "$@" > "$logs/$name.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ]; then
    echo "$name FAILED (rc $rc, ${secs} s)"
    grep -E '^\[  FAILED  \] [^ ]+\.' "$logs/$name.log" | sort -u | sed 's/^/    /'
    failed=$((failed + 1))
  elif grep -q 'SLUICE_SKIPPED\|^\[  SKIPPED \]' "$logs/$name.log"; then
    echo "$name SKIPPED (${secs} s): $(grep -m1 -o 'SLUICE_SKIPPED: .*' "$logs/$name.log")"
    skipped=$((skipped + 1))
  else
    echo "$name PASSED (${secs} s): $(grep -m1 -o '\[  PASSED  \] .*' "$logs/$name.log")"
    passed=$((passed + 1))
  fi
done
echo "logs: $logs"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
