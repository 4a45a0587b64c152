#!/usr/bin/env bash
# tools/batch_decode on the CPU with a micro qwen35moe (8 experts, 2 per
# token): one JSON object per batch size; a lone sequence acquires exactly k
# experts a layer and step, a batch of 4 the union of its rows' (more than k,
# at most every expert); a bad batch size is refused with its value named.
set -uo pipefail
mkmodel="$1"
batch_decode="$2"
slotsim="$3"
dir="${TEST_TMPDIR:-/tmp}"
model="$dir/batch_decode.gguf"
fail() { echo "FAIL: $*"; exit 1; }

"$mkmodel" --arch qwen35moe --shape micro --out "$model" >/dev/null || fail "mkmodel"
"$batch_decode" --model "$model" --sequences 1,4 --prompt_tokens 6 --decode_tokens 5 \
  --warmup_steps 1 --threads 2 --json >"$dir/out" 2>"$dir/err" \
  || fail "batch_decode exited $?: $(cat "$dir/err")"
cat "$dir/err" "$dir/out"
[ "$(wc -l <"$dir/out")" -eq 2 ] || fail "expected 2 JSON lines"
python3 - "$dir/out" <<'PY' || exit 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
one, four = rows
def check(cond, what):
    if not cond:
        print("FAIL:", what, rows)
        sys.exit(1)
check(one["sequences"] == 1 and four["sequences"] == 4, "sequences")
check(one["steps"] == 5 and four["steps"] == 5, "steps")
check(one["experts_per_layer_step"] == 2.0, "a lone token acquires k=2 experts a layer")
check(2.0 < four["experts_per_layer_step"] <= 8.0, "a batch of 4 acquires the union")
check(four["decode_tok_s"] > 0 and four["step_ms_median"] > 0, "timings")
check(four["step_ms_p99"] >= four["step_ms_median"], "p99 >= median")
check(one["misses"] == 0 and four["misses"] == 0, "the CPU reads experts in place")
PY
grep -qE '^sequences=4 steps=5 decode_tok_s=[0-9.]+ ' "$dir/err" || fail "summary line"

if "$batch_decode" --model "$model" --sequences 1,0 >/dev/null 2>"$dir/err2"; then
  fail "--sequences 0 accepted"
fi
grep -q '"0" is not a batch size' "$dir/err2" || fail "bad size message: $(cat "$dir/err2")"

# --routing: a trace of one token a layer routes every row of every
# sequence to the same k experts, so a batch of 4 acquires exactly k.
"$slotsim" --synthetic uniform --layers 4 --experts 8 --k 2 --tokens 1 \
  --write_trace "$dir/one.trace" >/dev/null 2>&1 || fail "slotsim --write_trace"
"$batch_decode" --model "$model" --sequences 4 --prompt_tokens 6 --decode_tokens 3 \
  --warmup_steps 0 --routing "trace:$dir/one.trace" --json >"$dir/out3" 2>"$dir/err3" \
  || fail "batch_decode --routing exited $?: $(cat "$dir/err3")"
python3 - "$dir/out3" "$dir/one.trace" <<'PY' || exit 1
import json, sys
r = json.loads(open(sys.argv[1]).read())
if r["experts_per_layer_step"] != 2.0 or r["routing"] != "trace:" + sys.argv[2]:
    print("FAIL: forced routing", r)
    sys.exit(1)
PY
echo PASS
