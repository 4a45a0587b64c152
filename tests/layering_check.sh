#!/usr/bin/env bash
# Proves the layer table of docs/ARCHITECTURE.md: for each folder, no target in
# it can see (Bazel visibility) a target of a folder it must not depend on.
# One `bazel query 'visible(T, FORBIDDEN)'` per folder, a union over the
# folder's targets T; every answer must be empty. Then, for the supervisor
# side (daemon/, clients/), `deps(...)`: what they link through any path must
# hold no kernels, model, worker or CUDA runtime. tests/run_all.sh runs it
# before the tests and counts it in its summary. Bazel queries cannot run
# inside a Bazel test, hence a script.
# Usage: tests/layering_check.sh BAZEL
set -uo pipefail
bazel_bin="$1"
cd "$(dirname "$0")/.."

# Folders that exist in this tree (memory/ may not yet).
all() {
  local out="" d
  for d in "$@"; do
    if [ -f "$d/BUILD.bazel" ] || [ -f "$d/BUILD" ]; then out="${out:+$out + }//$d/..."; fi
  done
  echo "$out"
}

# FROM folder, then the expression of what it must not see.
rows=(
  "base|$(all format config loader kernels memory model planning sched wire worker daemon clients tools bench tests fuzz)"
  "proto|$(all format config loader kernels memory model planning sched wire worker daemon clients tools bench tests fuzz)"
  # The ggml type table: plain data, the standard library only.
  "format|$(all config loader kernels memory model planning sched wire worker daemon clients tools bench tests fuzz) + //third_party/cuda:runtime"
  "loader|$(all config kernels memory model planning sched wire worker daemon clients tools bench tests fuzz)"
  "kernels|$(all loader config memory model planning sched wire worker daemon clients tools bench tests fuzz)"
  # Shared settings: Abseil, base and (for the Hello's fields only) proto;
  # nothing of the layers that take the settings.
  "config|$(all format loader kernels memory model planning sched wire worker daemon clients tools bench tests fuzz) + //third_party/cuda:runtime"
  "memory|$(all model planning sched wire worker daemon clients tools bench tests fuzz)"
  "model|$(all planning sched wire worker daemon clients tools bench tests fuzz)"
  # The offline plan of a model file (sluicectl plan): above memory/ and
  # loader/, below everything else; never kernels/ or the CUDA runtime.
  "planning|$(all kernels model sched wire worker daemon clients tools bench tests fuzz) + //third_party/cuda:runtime"
  # The scheduler is plain bookkeeping: Abseil only, nothing of the model,
  # memory/ or kernels (the worker maps its plans onto them).
  "sched|$(all format config loader kernels memory model planning wire worker daemon clients tools bench tests fuzz) + //third_party/cuda:runtime"
  # The supervisor<->worker protocol: Abseil and protobuf only; daemon/ and
  # worker/ both depend on it, it on neither.
  "wire|$(all format config loader kernels memory model planning sched worker daemon clients tools bench tests fuzz) + //third_party/cuda:runtime"
  "worker|$(all planning daemon clients tools bench tests fuzz)"
  "daemon|$(all worker kernels memory model planning sched clients tools bench tests fuzz) + //third_party/cuda:runtime"
  # clients/: the public API, config/ and, for sluicectl plan, planning/;
  # nothing else below wire/.
  "clients|$(all format loader kernels memory model sched wire worker daemon tools bench tests fuzz) + //third_party/cuda:runtime"
  # fuzz/ is test side (layers.bzl _TEST_SIDE), like tools/ and bench/: it
  # may see every layer below the processes, never the processes themselves
  # or the other test-side folders.
  "fuzz|$(all worker daemon clients tools bench tests)"
)

# FROM folder, then what none of its targets may link, through any path:
# visibility governs direct edges only, and clients/ reaches memory/'s
# planner through planning/. The supervisor side never links kernels, the
# model, the worker or the CUDA runtime.
links=(
  "daemon|$(all kernels model worker) + //third_party/cuda:runtime"
  "clients|$(all kernels model worker) + //third_party/cuda:runtime"
)

bad=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for row in "${rows[@]}"; do
  from="${row%%|*}"
  forbidden="${row#*|}"
  [ -f "$from/BUILD.bazel" ] || continue
  targets=$("$bazel_bin" query --noshow_progress "//$from/..." 2>/dev/null) || {
    echo "layering: bazel query //$from/... failed"; bad=1; continue; }
  expr=""
  for t in $targets; do expr="${expr:+$expr + }visible($t, \$f)"; done
  # Bazel 4 lets every target see a config_setting (select keys), whatever
  # its visibility; those are not dependencies.
  query="let f0 = $forbidden in let f = \$f0 - kind(config_setting, \$f0) in $expr"
  if ! seen=$("$bazel_bin" query --noshow_progress "$query" 2>"$err"); then
    echo "layering: query for $from/ failed:"; cat "$err"; bad=1; continue
  fi
  if [ -n "$seen" ]; then
    echo "layering: $from/ can see targets of folders it must not depend on:"
    echo "$seen" | head -n 10 | sed 's/^/  /'
    n=$(echo "$seen" | wc -l)
    if [ "$n" -gt 10 ]; then echo "  ... and $((n - 10)) more"; fi
    bad=1
  else
    echo "layering: $from/ ok ($(echo "$targets" | wc -l) targets)"
  fi
done
for row in "${links[@]}"; do
  from="${row%%|*}"
  forbidden="${row#*|}"
  [ -f "$from/BUILD.bazel" ] || continue
  query="let f0 = $forbidden in deps(//$from/...) intersect (\$f0 - kind(config_setting, \$f0))"
  if ! linked=$("$bazel_bin" query --noshow_progress "$query" 2>"$err"); then
    echo "layering: links query for $from/ failed:"; cat "$err"; bad=1; continue
  fi
  if [ -n "$linked" ]; then
    echo "layering: $from/ links targets it must not (bazel query 'somepath(//$from/..., T)' shows how):"
    echo "$linked" | head -n 10 | sed 's/^/  /'
    bad=1
  else
    echo "layering: $from/ links ok"
  fi
done
exit "$bad"
