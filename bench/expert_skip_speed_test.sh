#!/usr/bin/env bash
# bench/expert_skip_speed.sh on a mkmodel micro model: one line per round
# and threshold, with its rates and skipped pairs.
set -uo pipefail
mkmodel="$1" generate="$2"
dir="${TEST_TMPDIR:-/tmp}/expert_skip_speed"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/bin"
cp "$generate" "$dir/bin/"
"$mkmodel" --shape micro --out "$dir/m.gguf" >/dev/null 2>&1 || fail "mkmodel"
out=$(bench/expert_skip_speed.sh "$dir/bin" "$dir/m.gguf" 1 0 0.2 2>&1) || fail "script: $out"
echo "$out"
[ "$(echo "$out" | grep -Ec '^round=[12] skip=(0|0\.2) decode_tok_s=[0-9.]+ prefill_tok_s=[0-9.]+ ttft_ms=[0-9.]+ skipped_prefill=[0-9]+ skipped_decode=[0-9]+$')" = 4 ] ||
  fail "four result lines"
echo "$out" | grep -q "^round=1 skip=0 .* skipped_prefill=0 skipped_decode=0$" || fail "threshold 0 skips nothing"
echo PASS
