#!/bin/bash
# Runs the three fuzz targets (gguf, frame, tokenizer) of a bundle made by
# fuzz/bundle.sh, in parallel, each on its own cores, until each has done at least
# EXECS executions or SECONDS have passed, and prints one summary line per
# target for docs/STATUS.md.
#
#   ./run_all.sh [N] [EXECS] [SECONDS]   defaults: see below, 10000000, 540
#
# N: cores (libFuzzer workers) per target, one number for all three or
# G,F,T for gguf, frame and tokenizer. The default gives the tokenizer the
# most, as its executions are the slowest (one core of the development
# machine, 2026-12-01: gguf ~11,500/s, frame ~22,000/s, tokenizer
# ~2,300-7,000/s): gguf and frame nproc/5 each (at least 1), the tokenizer
# the rest (16 cores: 3,3,10).
#
# Everything it needs is in the bundle: bin/ (the fuzzers, clang ASan+UBSan
# builds), lib/ (the shared libraries a base Ubuntu 24.04 lacks; it sets
# LD_LIBRARY_PATH to that folder only), corpus/<target>/ (the seeds). Each
# target runs as libFuzzer -jobs=N -workers=N in work/<target>/ (or under
# FUZZ_WORK): the workers share one growing corpus (libFuzzer reloads it),
# each stops after EXECS/N executions or SECONDS, and writes fuzz-<i>.log;
# findings (crash-, leak-, timeout-, oom- files) land in
# work/<target>/artifacts/. Coverage is one pass of the final corpus
# (-runs=0), so it is the union of what the workers found.
#
# Input size caps (-max_len), which bound the cost of one execution:
#   gguf 4096: room for a header with dozens of keys and tensor infos (the
#     largest seed is 1088 bytes); tensor data is checked as ranges, so
#     longer files add bytes, not code paths.
#   frame 4096: several frames of every message type; a frame's length
#     prefix may still announce up to 4 GiB, which is the decoder's hard case.
#   tokenizer 512: dozens of pre-tokenized words with every special token,
#     multi-byte and invalid UTF-8; encoding cost grows faster than the
#     length (byte-pair merging within a word), so longer texts cost several
#     times more per execution for no new branch (coverage at 512 and at
#     4096 was the same in 20 s runs, 2026-12-01).
# Exit status: 0 when no target had a finding, 1 otherwise.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cores=$(nproc)
fifth=$(( cores / 5 > 0 ? cores / 5 : 1 ))
rest=$(( cores - 2 * fifth > 0 ? cores - 2 * fifth : 1 ))
spec="${1:-$fifth,$fifth,$rest}"
execs="${2:-10000000}"
secs="${3:-540}"
work="${FUZZ_WORK:-$here/work}"
export LD_LIBRARY_PATH="$here/lib"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1
targets=(gguf frame tokenizer)
declare -A max_len=([gguf]=4096 [frame]=4096 [tokenizer]=512)
declare -A workers
IFS=, read -r -a counts <<< "$spec"
for i in 0 1 2; do
  c="${counts[$i]:-${counts[0]}}"
  [[ "$c" =~ ^[1-9][0-9]*$ ]] || { echo "run_all.sh: bad N '$spec' (a number or G,F,T)" >&2; exit 2; }
  workers[${targets[$i]}]="$c"
done

run_target() {
  local t="$1" dir="$work/$1"
  local n="${workers[$1]}"
  local per_worker=$(( (execs + n - 1) / n ))
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -n "$here/corpus/$t/"* "$dir/corpus/" 2>/dev/null || true
  cd "$dir" || return 1
  local start end
  start=$(date +%s)
  "$here/bin/${t}_fuzzer" corpus -jobs="$n" -workers="$n" \
    -runs="$per_worker" -max_total_time="$secs" -max_len="${max_len[$t]}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" > "$dir/driver.log" 2>&1
  end=$(date +%s)
  echo $(( end - start )) > "$dir/wall_s"
}

echo "fuzzing gguf, frame, tokenizer on ${workers[gguf]}, ${workers[frame]}, ${workers[tokenizer]} cores, $execs executions each or ${secs}s; work: $work"
for t in "${targets[@]}"; do run_target "$t" & done
wait

found_any=0
echo
echo "$(date -u +%Y-%m-%d), $(nproc) cores, ./run_all.sh $spec $execs $secs (libFuzzer -jobs=N -workers=N, ASan+UBSan, clang 14):"
for t in "${targets[@]}"; do
  dir="$work/$t"
  total=0
  for log in "$dir"/fuzz-*.log; do
    [ -f "$log" ] || continue
    # The final stats, or (a worker killed by a finding) its last status line.
    u=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
    [ -n "$u" ] || u=$(grep -oE "^#[0-9]+" "$log" | tr -d '#' | tail -1)
    total=$(( total + ${u:-0} ))
  done
  wall=$(cat "$dir/wall_s" 2>/dev/null || echo 1)
  cov=$("$here/bin/${t}_fuzzer" "$dir/corpus" -runs=0 -max_len="${max_len[$t]}" 2>&1 \
    | grep -oE "INITED cov: [0-9]+ ft: [0-9]+ corp: [0-9]+" | tail -1 \
    | sed -E 's/INITED cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+)/coverage \1 edges, \2 features, corpus \3 inputs/')
  findings=$(find "$dir/artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  [ "$findings" -eq 0 ] || found_any=1
  printf -- "- %s: %d executions in %d s (%d exec/s, %d workers), %s, %d findings\n" \
    "$t" "$total" "$wall" $(( total / (wall > 0 ? wall : 1) )) "${workers[$t]}" \
    "${cov:-coverage unknown}" "$findings"
done
[ "$found_any" -eq 0 ] || echo "findings are under $work/*/artifacts (reproduce: bin/<target>_fuzzer FILE)"
exit "$found_any"
