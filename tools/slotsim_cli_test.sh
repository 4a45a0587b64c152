#!/usr/bin/env bash
# generate --record_trace on a small mkmodel model, then slotsim replays the
# trace: the table, --json, a synthetic trace written and read back, and
# errors that name the file.
set -uo pipefail
mkmodel="$1"
generate="$2"
slotsim="$3"
dir="${TEST_TMPDIR:-/tmp}"
model="$dir/slotsim_cli.gguf"
trace="$dir/slotsim_cli.trace"
fail() { echo "FAIL: $*"; exit 1; }

"$mkmodel" --arch qwen35moe --shape micro --out "$model" >/dev/null || fail "mkmodel"
"$generate" --model "$model" --prompt "The license" --max-tokens 6 --ignore-eos \
  --record-trace "$trace" >/dev/null 2>"$dir/gen_err" || fail "generate: $(cat "$dir/gen_err")"
grep -qE "^routing_trace=$trace records=[1-9][0-9]*$" "$dir/gen_err" \
  || fail "generate summary: $(cat "$dir/gen_err")"

"$slotsim" --trace "$trace" --policy lru,lfu,belady --arena_fraction 1,0.25 \
  >"$dir/table" 2>"$dir/err" || fail "slotsim: $(cat "$dir/err")"
cat "$dir/table"
[ "$(grep -cE '^(lru|lfu|belady) ' "$dir/table")" = 6 ] || fail "6 rows expected"
grep -qE '^trace: [0-9]+ records, [0-9]+ layers x [0-9]+ experts, k=[0-9]+' "$dir/table" \
  || fail "trace line"

"$slotsim" --trace "$trace" --policy lru --slots 0 --host_fraction 1 --json \
  >"$dir/json" || fail "slotsim --json"
grep -q '"policy": "lru", "slots": 0, "host_slots": ' "$dir/json" || fail "json: $(cat "$dir/json")"
grep -q '"hits": 0,' "$dir/json" || fail "0 slots must give 0 hits"

"$slotsim" --synthetic cyclic --layers 2 --experts 16 --k 4 --tokens 40 \
  --write_trace "$dir/cyc.trace" --policy lru --slots 16 >/dev/null || fail "synthetic"
"$slotsim" --trace "$dir/cyc.trace" --policy lru --slots 16 --json >"$dir/cyc.json" \
  || fail "replay of the written synthetic trace"
grep -q '"lookups": 320, "hits": 0,' "$dir/cyc.json" || fail "cyclic lru: $(cat "$dir/cyc.json")"

if "$slotsim" --trace "$dir/missing.trace" >/dev/null 2>"$dir/err2"; then
  fail "missing trace accepted"
fi
grep -q "missing.trace" "$dir/err2" || fail "missing trace message: $(cat "$dir/err2")"
if "$slotsim" --trace "$trace" --policy mru >/dev/null 2>"$dir/err3"; then
  fail "unknown policy accepted"
fi
grep -q "valid: lru, lfu, tinylfu, belady" "$dir/err3" || fail "policy message: $(cat "$dir/err3")"
echo PASS
