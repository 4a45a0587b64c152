#!/usr/bin/env bash
# bench/warm_restart.py end to end on the CPU: two daemons on a mkmodel micro
# model, the first saving a usage profile at SIGTERM and the second loading
# it; every request reports its time to first token and the summary line
# compares them.
set -uo pipefail
mkmodel="$1" sluiced="$2" worker="$3" sluicectl="$4"
dir="${TEST_TMPDIR:-/tmp}/warm_restart"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/bin"
cp "$sluiced" "$worker" "$sluicectl" "$dir/bin/"
"$mkmodel" --shape micro --out "$dir/m.gguf" >/dev/null 2>&1 || fail "mkmodel"
out=$(python3 bench/warm_restart.py --bin "$dir/bin" --model "$dir/m.gguf" --profile "$dir/p.slep" \
  --prompt_words 20 --requests 2 -- --threads=1 2>&1) || fail "warm_restart.py: $out"
echo "$out"
[ -s "$dir/p.slep" ] || fail "no profile saved"
[ "$(echo "$out" | grep -Ec '^(cold|warm|warmed restart) +request [0-9]: prompt_tokens=[0-9]+ ttft_ms=[0-9.]+$')" = 4 ] ||
  fail "four requests with their TTFT"
echo "$out" | grep -Eq '^cold_ttft_ms=[0-9.]+ warm_median_ttft_ms=[0-9.]+ warmed_restart_ttft_ms=[0-9.]+ warmed_over_warm=[0-9.]+$' ||
  fail "summary line"
echo PASS
