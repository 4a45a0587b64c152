#!/usr/bin/env bash
# bench/run.sh end to end on the CPU: a micro model per locality written
# once (the second call reuses it), generate --json at each arena fraction,
# a stand-in llama-bench, then report.py on the results.json it wrote.
set -uo pipefail
mkmodel="$1"
generate="$2"
dir="${TEST_TMPDIR:-/tmp}/harness"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/bundle/bin" "$dir/llama"
cp "$mkmodel" "$generate" "$dir/bundle/bin/"
cp bench/testdata/fake_llama_bench.py "$dir/llama/llama-bench"
chmod +x "$dir/llama/llama-bench"

run() {
  bench/run.sh --out "$dir/out$1" --only "$2" --bundle "$dir/bundle" --models "$dir/models" \
    --llama "$dir/llama" --shapes micro --locality 0,0.5 --fractions 1,0.25 \
    --device cpu --prompt 12 --gen 5 --warmup 2 --threads 1 --commit test \
    --miss-policies copy,host \
    2>"$dir/log$1" || fail "run.sh $1: $(tail -5 "$dir/log$1")"
}
run 1 all
run 2 models
grep -q "reusing $dir/models/micro-q4_k_m-l4-loc0.5.gguf" "$dir/log2" || fail "model not reused"
python3 - "$dir/out1/results.json" <<'PY' || fail "results.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["machine"]["commit"] == "test", r["machine"]
assert [m["name"] for m in r["models"]] == ["micro-q4_k_m-l4-loc0", "micro-q4_k_m-l4-loc0.5"]
assert all(m["ok"] and m["routing"].startswith("routing: locality=") for m in r["models"])
s = r["sluice"]
assert [(x["locality"], x["fraction"], x["mode"]) for x in s] == [
    (0.0, 1.0, "resident"), (0.0, 0.25, "cache"), (0.0, 0.25, "cache, host misses"),
    (0.5, 1.0, "resident"), (0.5, 0.25, "cache"), (0.5, 0.25, "cache, host misses")], s
assert all(x["ok"] and x["result"]["generated_tokens"] == 5 for x in s)
assert s[1]["result"]["expert_options"]["arena_fraction"] == 0.25
assert [x["miss_policy"] for x in s[:3]] == ["copy", "copy", "host"]
assert s[2]["result"]["expert_options"]["miss_policy"] == "host"
# llama.cpp on the first locality only: -ngl 99 at -ncmoe 0 and 3 (4 blocks,
# 25% kept), then -ngl 0.
l = r["llama"]
assert [(x["placement"], x["n_cpu_moe"]) for x in l] == [("all_gpu", 0), ("ncmoe", 3), ("cpu", 0)], l
assert l[1]["gpu_expert_fraction"] == 0.25 and l[1]["decode_tok_s"] == 250.0
print("results ok")
PY
python3 bench/report.py "$dir/out1/results.json" --md "$dir/r.md" --png "$dir/r.png" \
  || fail "report.py"
grep -q "^## micro q4_k_m, routing locality 0.5" "$dir/r.md" || fail "report sections"
[ "$(head -c 4 "$dir/r.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "png header"
echo PASS
