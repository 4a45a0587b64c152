# Sourced by shell tests (sh_test deps = ["//base:testing_sh"]):
#   source "$TEST_SRCDIR/sluice/base/testing/testing.sh"
# The shell side of base/testing/skip.h and base/testing/goldens.h.

# Ends the test as skipped: the marker line tests/run_all.sh counts, exit 0.
sluice_skip() {
  echo "SLUICE_SKIPPED: $*"
  exit 0
}

# Sets SLUICE_GOLDENS to the goldens directory (the lookup of
# base/testing/goldens.h, run by //base:goldens_dir), or ends the test:
# skipped normally, failed under CI=true.
sluice_require_goldens() {
  local out rc=0
  # `|| rc=$?` keeps a nonzero status from ending a `set -e` script here.
  out=$("$TEST_SRCDIR/sluice/base/goldens_dir" 2>&1) || rc=$?
  case "$rc" in
    0) SLUICE_GOLDENS="$out" ;;
    2) sluice_skip "$out" ;;
    *) echo "FAIL: $out"; exit 1 ;;
  esac
}
