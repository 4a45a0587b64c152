#!/usr/bin/env bash
# tools/generate end to end on a small mkmodel model: sampler flags in both
# spellings, the summary lines, determinism for a seed, --chat, bad flags.
set -uo pipefail
mkmodel="$1"
generate="$2"
dir="${TEST_TMPDIR:-/tmp}"
model="$dir/generate_cli.gguf"
fail() { echo "FAIL: $*"; exit 1; }

"$mkmodel" --arch qwen35moe --shape micro --out "$model" >/dev/null || fail "mkmodel"

run() {
  "$generate" --model "$model" --prompt "The license" --max-tokens 8 \
    --ignore-eos --temperature 0.7 --top-k 20 --top_p 0.9 --min-p 0.05 \
    --repeat-penalty 1.1 --seed 3 --threads 2 "$@"
}
run >"$dir/out1" 2>"$dir/err1" || fail "generate exited $?: $(cat "$dir/err1")"
run >"$dir/out2" 2>"$dir/err2" || fail "second run"
cat "$dir/err1"
grep -qE '^prompt_tokens=[0-9]+ generated_tokens=8 finish=length ttft_ms=[0-9.]+ prefill_tok_s=[0-9.]+ decode_tok_s=[0-9.]+$' "$dir/err1" \
  || fail "timing line: $(head -1 "$dir/err1")"
grep -qE '^peak_rss_kb=[0-9]+ rss_anon_kb=[0-9]+ \(max while decoding [0-9]+\) kv_state_kb=[0-9]+ model_file_kb=[0-9]+ threads=2$' "$dir/err1" \
  || fail "memory line: $(tail -1 "$dir/err1")"
cmp -s "$dir/out1" "$dir/out2" || fail "same seed gave different text"

"$generate" --model "$model" --prompt "Hi" --chat --max-tokens 3 --ignore-eos \
  >/dev/null 2>"$dir/err3" || fail "--chat: $(cat "$dir/err3")"
grep -q "generated_tokens=3 finish=length" "$dir/err3" || fail "--chat summary"

if "$generate" --model "$model" --prompt "x" --top-p 1.5 >/dev/null 2>"$dir/err4"; then
  fail "--top-p 1.5 accepted"
fi
grep -q "top_p" "$dir/err4" || fail "bad top-p message: $(cat "$dir/err4")"
if "$generate" --model "$dir/missing.gguf" --prompt "x" >/dev/null 2>"$dir/err5"; then
  fail "missing model accepted"
fi
grep -q "missing.gguf" "$dir/err5" || fail "missing model message: $(cat "$dir/err5")"
echo PASS
