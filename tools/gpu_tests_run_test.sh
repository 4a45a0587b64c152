#!/usr/bin/env bash
# tools/gpu_tests_run.sh on stand-ins for the sm90 tests: one that passes,
# one that fails two cases, one that skips, and a file that is not a test.
set -euo pipefail
run="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/lib"
cat > "$dir/bin/a_sm90_test" <<'T'
#!/usr/bin/env bash
[ "$SLUICE_GOLDENS" = /g ] && [ "$SLUICE_GOLDENS_DEEPSEEK2" = /g2 ] || exit 3
echo "[  PASSED  ] 4 tests."
T
cat > "$dir/bin/b_sm90_test" <<'T'
#!/usr/bin/env bash
echo "[  FAILED  ] X.One (1 ms)"
echo "[  FAILED  ] X.Two (2 ms)"
echo "[  FAILED  ] X.One, where GetParam() = 1"
echo " 2 FAILED TESTS"
exit 1
T
cat > "$dir/bin/c_sm90_test" <<'T'
#!/usr/bin/env bash
echo "SLUICE_SKIPPED: no CUDA device here"
echo "[  SKIPPED ] Y.Z (0 ms)"
T
printf 'not a test\n' > "$dir/bin/readme_sm90_test.txt"
chmod +x "$dir"/bin/*_sm90_test
set +e
out="$(SM90_LOGS="$dir/logs" "$run" "$dir/bin" /g /g2)"
rc=$?
set -e
echo "$out"
fail() { echo "gpu_tests_run_test: $1"; exit 1; }
[ "$rc" -eq 1 ] || fail "exit $rc, want 1"
grep -q '^a_sm90_test PASSED (.*): \[  PASSED  \] 4 tests\.$' <<<"$out" || fail "a not passed"
grep -q '^b_sm90_test FAILED (rc 1, ' <<<"$out" || fail "b not failed"
[ "$(grep -c '^    \[  FAILED  \] X\.' <<<"$out")" -eq 3 ] || fail "b's failing cases not listed once each"
grep -q '^c_sm90_test SKIPPED (.*): SLUICE_SKIPPED: no CUDA device here$' <<<"$out" || fail "c not skipped"
[ "$(tail -1 <<<"$out")" = "1 passed, 1 failed, 1 skipped" ] || fail "summary"
[ -s "$dir/logs/b_sm90_test.log" ] || fail "no log kept"
echo "gpu_tests_run_test: ok"
