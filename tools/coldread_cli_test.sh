#!/usr/bin/env bash
# tools/coldread on a 2-shard mkmodel model: --disk_only's report (text and
# the JSON last line, field by field), the --disk_bytes cap, the host tier's
# run or its error (no device here: exit 1 naming why), and bad input.
set -uo pipefail
mkmodel="$1"
coldread="$2"
dir="${TEST_TMPDIR:-/tmp}"
model="$dir/coldread_cli.gguf"
fail() { echo "FAIL: $*"; exit 1; }

"$mkmodel" --arch qwen35moe --shape micro --split-count 2 --out "$model" >/dev/null \
  || fail "mkmodel"
shard="$dir/coldread_cli-00002-of-00002.gguf"  # any shard opens the set

"$coldread" "$shard" --disk_only --block_bytes 65536 --disk_threads 1,4 \
  >"$dir/out" 2>"$dir/err" || fail "--disk_only exited: $(cat "$dir/err")"
cat "$dir/out"
grep -qE '^model: .*coldread_cli-00002-of-00002.gguf \(2 shards\), 4 of 4 layers, 8 experts, 2 used per token, expert bytes 3145728, o_direct (yes|NO \(page cache\))$' \
  "$dir/out" || fail "model line"
[ "$(grep -cE '^disk threads=(1|4) block=65536 bytes=[0-9]+ seconds=[0-9.]+ GB/s=[0-9.]+$' "$dir/out")" = 2 ] \
  || fail "two disk lines expected"
grep -qE '^disk best threads=(1|4) GB/s=[0-9.]+$' "$dir/out" || fail "best line"
# io_uring at the default depths 8, 32, 64, or the reason it was refused.
[ "$(grep -cE '^uring depth=(8|32|64) registered=(yes|no) block=65536 bytes=[0-9]+ seconds=[0-9.]+ GB/s=[0-9.]+ vs_best_threads=[0-9.]+$' "$dir/out")" = 3 ] \
  || grep -qE '^uring skipped: ' "$dir/out" || fail "uring lines expected"
grep -qx 'tier skipped: disk_only' "$dir/out" || fail "skip line"
tail -1 "$dir/out" >"$dir/json"
python3 - "$dir/json" <<'PY' || fail "json fields: $(cat "$dir/json")"
import json, sys
r = json.load(open(sys.argv[1]))
def check(cond, what):
    if not cond:
        sys.exit("bad field: " + what)
check(r["shards"] == 2 and r["layers"] == 4 and r["n_layer"] == 4, "shape")
check(r["n_expert"] == 8 and r["n_expert_used"] == 2, "experts")
# 4 layers x 8 experts x (gate + up + down) of 32 KiB each.
check(r["expert_bytes"] == 4 * 8 * 3 * 32768, "expert_bytes %r" % r["expert_bytes"])
check(r["block_bytes"] == 65536, "block_bytes")
check([d["threads"] for d in r["disk"]] == [1, 4], "disk threads")
for d in r["disk"]:
    # Every expert byte once, widened to 4096-byte alignment at each range's ends.
    check(r["expert_bytes"] <= d["bytes"] < r["expert_bytes"] + 2 * 4096 * 12,
          "disk bytes %r" % d["bytes"])
    check(d["seconds"] > 0 and d["gbps"] > 0, "disk rate")
best = max(r["disk"], key=lambda d: d["gbps"])
check(r["disk_best"] == best, "disk_best")
check(r["tier"] == [] and r["tier_skipped"] == "disk_only", "tier")
print("json ok:", best["gbps"], "GB/s")
PY

"$coldread" --model "$shard" --disk_only --block_bytes 65536 --disk_bytes 65536 \
  --disk_threads 2 --json >"$dir/cap" || fail "--disk_bytes"
[ "$(wc -l <"$dir/cap")" -eq 1 ] || fail "--json printed more than one line"
grep -q '"disk": \[{"threads": 2, "bytes": 65536, ' "$dir/cap" || fail "cap: $(cat "$dir/cap")"

# The host tier: measured where there is a device, else exit 1 with the
# reason on stderr and in tier_skipped, after the disk figures.
"$coldread" "$shard" --disk_threads 2 --layers 2 >"$dir/tier" 2>"$dir/tier_err"
rc=$?
python3 - "$dir/tier" "$rc" <<'PY' || fail "tier run (rc=$rc): $(cat "$dir/tier") $(cat "$dir/tier_err")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
r = json.loads(lines[-1])
rc = int(sys.argv[2])
if r["layers"] != 2 or r["expert_bytes"] != 2 * 8 * 3 * 32768 or len(r["disk"]) != 1:
    sys.exit("disk part")
if rc == 0:
    # Batches of k = 2 (decode) and 8 (a layer): every expert read once.
    if [t["batch"] for t in r["tier"]] != [2, 8]:
        sys.exit("batches")
    for t in r["tier"]:
        if t["experts_from_disk"] != 16 or t["bytes"] != r["expert_bytes"]:
            sys.exit("tier bytes")
    print("tier measured")
elif rc == 1:
    if r["tier"] != [] or not r["tier_skipped"]:
        sys.exit("tier_skipped")
    print("no tier here:", r["tier_skipped"])
else:
    sys.exit("exit status")
PY
if [ "$rc" = 1 ]; then
  grep -q '^coldread: host tier not measured: ' "$dir/tier_err" || fail "tier message"
fi

if "$coldread" "$dir/missing.gguf" --disk_only >/dev/null 2>"$dir/err2"; then
  fail "missing model accepted"
fi
grep -q "missing.gguf" "$dir/err2" || fail "missing model message: $(cat "$dir/err2")"
"$coldread" "$shard" --disk_only --block_bytes 5000 >/dev/null 2>"$dir/err3"
[ $? = 2 ] || fail "--block_bytes 5000 accepted"
grep -q -- "--block_bytes: 5000 is not a positive multiple of 4096" "$dir/err3" \
  || fail "block message: $(cat "$dir/err3")"
"$coldread" "$shard" --tier_piece_bytes 1000 >/dev/null 2>"$dir/err4"
[ $? = 2 ] || fail "--tier_piece_bytes 1000 accepted"
grep -q -- '--tier_piece_bytes: "1000" is not 0 or a multiple of 4096' "$dir/err4" \
  || fail "piece message: $(cat "$dir/err4")"
echo PASS
