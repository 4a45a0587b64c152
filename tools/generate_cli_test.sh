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
# --json: one object on stdout (no text), checked field by field. On the CPU
# every expert is read in place, so the expert counters are all zero and
# there is no device memory.
"$generate" --model "$model" --prompt "The license" --max-tokens 6 --ignore-eos \
  --warmup-tokens 2 --expert-policy lfu --expert-arena-fraction 0.25 \
  --host-tier-bytes 4096 --expert-prefetch --expert-miss-policy cost \
  --expert-host-threads 3 --json >"$dir/json" 2>"$dir/err6" \
  || fail "--json exited: $(cat "$dir/err6")"
[ "$(wc -l <"$dir/json")" -eq 1 ] || fail "--json printed more than one line: $(cat "$dir/json")"
python3 - "$dir/json" <<'PY' || fail "--json fields: $(cat "$dir/json")"
import json, sys
r = json.load(open(sys.argv[1]))
def check(cond, what):
    if not cond:
        sys.exit("bad field: " + what)
check(r["device"] == "cpu", "device")
check(r["prompt_tokens"] > 0 and r["generated_tokens"] == 6, "token counts")
check(r["finish"] == "length" and r["warmup_tokens"] == 2, "finish/warmup")
check(r["ttft_ms"] > 0 and r["prefill_tok_s"] > 0 and r["decode_tok_s"] > 0, "timings")
check(r["rss"]["peak_bytes"] >= r["rss"]["anon_bytes"] > 0, "rss")
check(r["kv_state_bytes"] > 0 and r["model_file_bytes"] > 0, "sizes")
o = r["expert_options"]
check(o == {"slots": -1, "arena_fraction": 0.25, "policy": "lfu",
            "host_tier_bytes": 4096, "prefetch": True, "miss_policy": "cost",
            "host_threads": 3, "skip": 0}, "expert_options %r" % o)
d = r["device_memory"]
check(d["by_kind"] == {} and d["peak_bytes"] == 0, "cpu device memory %r" % d)
e = r["experts"]
check(e["streaming"] is False and e["slots_capacity"] == e["slots"] == 0, "experts streaming")
dec = e["decode"]
check(dec["tokens"] == 5, "decode steps %r" % dec.get("tokens"))
check(dec["lookups"] == 0 and dec["hit_rate"] == 0, "decode counters")
check(e["skipping"] is False and dec["skipped"] == 0, "nothing skipped without --expert_skip")
check(dec["bytes_per_token"] == {"host": 0, "disk": 0, "moved": 0}, "bytes_per_token")
check(set(dec["bytes_by_tier"]) == {"host", "disk"}, "tiers")
# bytes_streamed is the metric's name; bytes_filled, its old key, stays beside it.
check(dec["bytes_streamed"] == dec["bytes_filled"] == 0, "bytes_streamed %r" % dec)
check(e["prefill"]["tokens"] == r["prompt_tokens"], "prefill tokens")
print("json ok:", r["prefill_tok_s"], r["decode_tok_s"])
PY

# --expert_skip (issue 22): the JSON counts the skipped experts. Whether
# any are skipped depends on the page cache, so the file's pages are
# dropped first where the kernel allows it (not on tmpfs); the count must
# be a number either way and is printed.
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' \
  "$model" || true
"$generate" --model "$model" --prompt "The license" --max-tokens 6 --ignore-eos \
  --expert_skip 0.9 --json >"$dir/json_skip" 2>"$dir/err_skip" \
  || fail "--expert_skip exited: $(cat "$dir/err_skip")"
python3 - "$dir/json_skip" <<'PY' || fail "--expert_skip fields: $(cat "$dir/json_skip")"
import json, sys
r = json.load(open(sys.argv[1]))
e = r["experts"]
assert r["expert_options"]["skip"] == 0.9, r["expert_options"]
assert e["skipping"] is True, e
n = [e[p]["skipped"] for p in ("prefill", "decode", "since_load")]
assert all(isinstance(x, int) and x >= 0 for x in n), n
assert n[0] + n[1] == n[2], n
print("skipped (prefill, decode, since load):", n)
PY

for bad in "--expert-policy fifo" "--expert-arena-fraction 1.5" "--expert-slots -2" \
    "--expert-miss-policy cpu" "--expert-host-threads -1" "--expert-skip 1"; do
  # shellcheck disable=SC2086
  if "$generate" --model "$model" --prompt "x" $bad >/dev/null 2>"$dir/err7"; then
    fail "$bad accepted"
  fi
  flag="${bad%% *}"
  flag="--$(echo "${flag#--}" | tr - _)"  # messages spell flags with '_'
  grep -qF -e "$flag" "$dir/err7" || fail "$bad message: $(cat "$dir/err7")"
done

# --routing (issue 22): replaying the run's own recorded routing gives the
# same text; a realistic synthetic routing changes it and is named in the
# JSON; a trace of another shape and an unknown kind are refused by name.
run --record_trace "$dir/own.trace" >"$dir/out8" 2>"$dir/err8" || fail "record: $(cat "$dir/err8")"
cmp -s "$dir/out1" "$dir/out8" || fail "recording changed the text"
run --routing "trace:$dir/own.trace" >"$dir/out9" 2>"$dir/err9" || fail "replay: $(cat "$dir/err9")"
cmp -s "$dir/out1" "$dir/out9" || fail "replaying the run's own routing changed the text"
run --routing realistic --json >"$dir/out10" 2>"$dir/err10" || fail "realistic: $(cat "$dir/err10")"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["routing"]=="realistic", r["routing"]' \
  "$dir/out10" || fail "routing key"
run --json >"$dir/out11" 2>/dev/null || fail "json run"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["routing"]=="router", r["routing"]' \
  "$dir/out11" || fail "default routing key"
"$mkmodel" --arch qwen3moe --shape tiny --out "$dir/other.gguf" >/dev/null || fail "mkmodel other"
"$generate" --model "$dir/other.gguf" --prompt "x" --max-tokens 2 --record_trace "$dir/other.trace" \
  >/dev/null 2>&1 || fail "record other"
if run --routing "trace:$dir/other.trace" >/dev/null 2>"$dir/err12"; then
  fail "a trace of another model's shape accepted"
fi
grep -qF "routing trace $dir/other.trace: " "$dir/err12" || fail "shape message: $(cat "$dir/err12")"
if run --routing "zipf:x" >/dev/null 2>"$dir/err13"; then fail "--routing zipf:x accepted"; fi
grep -qF -e "--routing=zipf:x: " "$dir/err13" || fail "kind message: $(cat "$dir/err13")"
echo PASS
