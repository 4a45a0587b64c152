#!/usr/bin/env bash
# bench/run.sh end to end on the CPU: a micro model per locality written
# once (the second call reuses it), generate --json at each arena fraction,
# a stand-in llama-bench, then report.py on the results.json it wrote; then
# a third call with --depths and a stand-in that reports flash attention off
# and on, for the kept figure and the depth rows.
set -uo pipefail
mkmodel="$1"
generate="$2"
batch_decode="$3"
dir="${TEST_TMPDIR:-/tmp}/harness"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/bundle/bin" "$dir/llama"
cp "$mkmodel" "$generate" "$batch_decode" "$dir/bundle/bin/"
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

# Flash attention off and on, and decode at depth (--depths): a stand-in
# that honours -fa, -d and -p 0 and logs its arguments. Its prompt is faster
# with fa 0, its decode with fa 1 (by 20%), and decode at depth D is
# 1 + D / 8 times slower.
mkdir -p "$dir/llama2"
cat >"$dir/llama2/llama-bench" <<'PY'
#!/usr/bin/env python3
import json, os, sys
a = sys.argv
arg = lambda f, d: a[a.index(f) + 1] if f in a else d
with open(os.path.join(os.path.dirname(a[0]), "args.log"), "a") as log:
    log.write(" ".join(a[1:]) + "\n")
ngl, p, n = int(arg("-ngl", "99")), int(arg("-p", "512")), int(arg("-n", "128"))
out = []
for ncm in map(int, arg("-ncmoe", "0").split(",")):
    for fa in map(int, arg("-fa", "0").split(",")):
        for d in map(int, arg("-d", "0").split(",")):
            base = 1000.0 / (1 + ncm) if ngl else 50.0
            for np_, ng, ts in ((p, 0, base * (11 if fa == 0 else 10)),
                                (0, n, base * (1.2 if fa else 1.0) / (1 + d / 8))):
                if np_ or ng:
                    out.append({"n_gpu_layers": ngl, "n_cpu_moe": ncm, "flash_attn": fa,
                                "n_prompt": np_, "n_gen": ng, "n_depth": d, "avg_ts": ts * 0.95,
                                "samples_ts": [ts * 0.9, ts], "build_commit": "fake2"})
print(json.dumps(out))
PY
chmod +x "$dir/llama2/llama-bench"
echo "-DGGML_CUDA=ON -DGGML_CUDA_FA=ON" >"$dir/llama2/FLAGS"
bench/run.sh --out "$dir/out3" --bundle "$dir/bundle" --models "$dir/models" \
  --llama "$dir/llama2" --shapes micro --locality 0 --fractions 1,0.5,0.25 --depths 0,8 \
  --device cpu --prompt 12 --gen 5 --warmup 2 --threads 1 --commit test \
  2>"$dir/log3" || fail "run.sh 3: $(tail -5 "$dir/log3")"
python3 - "$dir/out3/results.json" "$dir/llama2/args.log" <<'PY' || fail "results.json with depths"
import json, sys
r = json.load(open(sys.argv[1]))
calls = open(sys.argv[2]).read().splitlines()
assert r["settings"]["depths"] == [0, 8] and r["settings"]["llama_flags"] == "-DGGML_CUDA=ON -DGGML_CUDA_FA=ON"
s = r["sluice"]
# Depth 8 at 100% and 25% only (--depth-fractions), after the depth-0 rows:
# a prompt of 8 tokens and a context of 8 + 5 + 16.
assert [(x["fraction"], x["depth"]) for x in s] == [(1.0, 0), (0.5, 0), (0.25, 0), (1.0, 8), (0.25, 8)], s
deep = s[3]
assert deep["ok"] and deep["result"]["prompt_tokens"] == 8, deep
assert deep["cmd"][deep["cmd"].index("--ctx") + 1] == "29", deep["cmd"]
assert s[0]["result"]["prompt_tokens"] == 12
# Four llama-bench calls, each with -fa 0,1: the placements at depth 0, the
# CPU, decode only (-p 0) at depth 8 for -ncmoe 0 and 3 (100%, 25%), then
# the prompt of 8 tokens alone (-n 0 -p 8) at the same placements.
assert len(calls) == 4 and all(" -fa 0,1 " in c for c in calls), calls
assert "-ncmoe 0,2,3" in calls[0] and "-ngl 0" in calls[1], calls
assert "-p 0" in calls[2] and "-d 8" in calls[2] and "-ncmoe 0,3" in calls[2], calls
assert "-n 0" in calls[3] and "-p 8" in calls[3] and "-d" not in calls[3].split(), calls
assert "-ncmoe 0,3" in calls[3], calls
l = r["llama"]
assert [(x["placement"], x["n_cpu_moe"], x["depth"]) for x in l] == [
    ("all_gpu", 0, 0), ("ncmoe", 2, 0), ("ncmoe", 3, 0), ("cpu", 0, 0),
    ("all_gpu", 0, 8), ("ncmoe", 3, 8)], l
g = l[0]
# The better setting is kept per test: prompt with fa 0, decode with fa 1.
assert (g["prompt_tok_s_fa0"], g["prompt_tok_s_fa1"], g["prompt_tok_s"], g["prompt_fa"]) == (
    11000.0, 10000.0, 11000.0, 0), g
assert (g["decode_tok_s_fa0"], g["decode_tok_s_fa1"], g["decode_tok_s"], g["decode_fa"]) == (
    1000.0, 1200.0, 1200.0, 1), g
assert g["decode_tok_s_avg"] == 1140.0, g
# Depth 8's decode and its prompt of 8 tokens in one row per placement.
assert l[4]["decode_tok_s"] == 600.0 and l[4]["decode_fa"] == 1, l[4]
assert (l[4]["prompt_tok_s"], l[4]["prompt_fa"]) == (11000.0, 0), l[4]
assert l[5]["decode_tok_s"] == 150.0 and l[5]["prompt_tok_s"] == 2750.0, l[5]
print("results with depths ok")
PY
python3 bench/report.py "$dir/out3/results.json" --md "$dir/r3.md" --png "$dir/r3.png" \
  || fail "report.py with depths"
want() { grep -qF -- "$1" "$dir/r3.md" || fail "report line: $1"; }
want "- llama.cpp build flags: -DGGML_CUDA=ON -DGGML_CUDA_FA=ON"
want "| 0 | all_gpu | 99 | 0 | 100% | 11,000.0 | 1,200.0 | 11,000.0 / 10,000.0 | 1,000.0 / 1,200.0 | 0, 1 |"
want "| 0 | ncmoe | 3 | 8 | 150.0 (fa 1) | 125.0 / 150.0 |"
want "## Decode at depth"
want "all resident at depth 16384, decode: not measured (goal >= 1.5x)"
python3 - "$dir/r3.md" "$dir/out3/results.json" <<'PY' || fail "depth table"
import json, re, sys
md = open(sys.argv[1]).read()
s = json.load(open(sys.argv[2]))["sluice"]
d = s[3]["result"]["decode_tok_s"]
pf = s[3]["result"]["prefill_tok_s"]
row = next(l for l in md.splitlines() if l.startswith("| 100% | resident | 8 |"))
cells = [c.strip() for c in row.strip("|").split("|")]
assert cells[5:] == ["all on GPU", "600.0 (fa 1)", f"{d / 600:,.2f}", "11,000.0 (fa 0)",
                     f"{pf / 11000:,.2f}"], cells
# The main table's llama.cpp cells carry the kept setting too.
main = next(l for l in md.splitlines() if l.startswith("| 100% | resident | "))
cells = [c.strip() for c in main.strip("|").split("|")]
assert cells[15:18] == ["all on GPU", "1,200.0 (fa 1)", "11,000.0 (fa 0)"], cells
assert "all resident vs llama.cpp all on GPU fa 1, decode: " in md
print("report with depths ok")
PY

# --routings: a realistic row beside the router's, each saying which.
bench/run.sh --out "$dir/out4" --only sluice --bundle "$dir/bundle" --models "$dir/models" \
  --shapes micro --locality 0 --fractions 0.25 --routings router,realistic \
  --device cpu --prompt 12 --gen 5 --warmup 2 --threads 1 --commit test \
  2>"$dir/log4" || fail "run.sh --routings: $(tail -5 "$dir/log4")"
python3 - "$dir/out4/results.json" <<'PY' || fail "routing rows"
import json, sys
s = json.load(open(sys.argv[1]))["sluice"]
assert [(x["routing"], x["mode"]) for x in s] == [
    ("router", "cache"), ("realistic", "cache, realistic routing")], s
assert all(x["ok"] for x in s), s
assert [x["result"]["routing"] for x in s] == ["router", "realistic"], s
assert s[1]["cmd"][-4:] == ["--routing", "realistic", "--routing_seed", "1"], s[1]["cmd"]
print("routing rows ok")
PY

# A deepseek2 shape (issue 23's kimi_k2 runs the same way): mkmodel gets
# --arch deepseek2, and -ncmoe counts the dense lead block first (3 blocks,
# 1 dense: half the experts off the GPU is -ncmoe 2).
bench/run.sh --out "$dir/out6" --bundle "$dir/bundle" --models "$dir/models" \
  --llama "$dir/llama" --no-llama-cpu --shapes ds2_micro --locality 0 --fractions 1,0.5 \
  --device cpu --prompt 12 --gen 5 --warmup 2 --threads 1 --commit test \
  2>"$dir/log6" || fail "run.sh ds2_micro: $(tail -5 "$dir/log6")"
python3 - "$dir/out6/results.json" <<'PY' || fail "deepseek2 rows"
import json, sys
r = json.load(open(sys.argv[1]))
m = r["models"][0]
assert m["ok"] and m["cmd"][:4] == ["--arch", "deepseek2", "--shape", "micro"], m
s = r["sluice"]
assert [(x["fraction"], x["ok"]) for x in s] == [(1.0, True), (0.5, True)], s
assert s[0]["result"]["generated_tokens"] == 5, s[0]
assert [x["n_cpu_moe"] for x in r["llama"]] == [0, 2], r["llama"]
print("deepseek2 rows ok")
PY

# --batched (issue 19): batch_decode at 1 and 2 sequences, resident and at
# 25%, beside a stand-in llama-batched-bench (its S_TG: 100 x B, halved
# with -ncmoe, 10% more with -fa 1), and report.py's batched table.
mkdir -p "$dir/llama3"
cp bench/testdata/fake_llama_batched_bench.py "$dir/llama3/llama-batched-bench"
cp bench/testdata/fake_llama_bench.py "$dir/llama3/llama-bench"
chmod +x "$dir/llama3/llama-batched-bench" "$dir/llama3/llama-bench"
bench/run.sh --out "$dir/out5" --bundle "$dir/bundle" --models "$dir/models" \
  --llama "$dir/llama3" --no-llama-cpu --shapes micro --locality 0 --fractions 1 \
  --batched 1,2 --batched-fractions 1,0.25 --batched-prompt 6 --batched-gen 3 \
  --device cpu --prompt 12 --gen 5 --warmup 2 --threads 1 --commit test \
  2>"$dir/log5" || fail "run.sh --batched: $(tail -5 "$dir/log5")"
python3 - "$dir/out5/results.json" <<'PY' || fail "batched rows"
import json, sys
b = json.load(open(sys.argv[1]))["batched"]
s, l = b["sluice"], b["llama"]
assert [(x["fraction"], x["sequences"]) for x in s] == [(1.0, 1), (1.0, 2), (0.25, 1), (0.25, 2)], s
assert all(x["ok"] and x["decode_tok_s"] > 0 and x["step_ms_median"] > 0 for x in s), s
assert [(x["fraction"], x["n_cpu_moe"], x["sequences"], x["decode_tok_s"]) for x in l] == [
    (1.0, 0, 1, 110.0), (1.0, 0, 2, 220.0), (0.25, 3, 1, 55.0), (0.25, 3, 2, 110.0)], l
assert l[1]["decode_tok_s_fa0"] == 200.0 and l[1]["decode_tok_s_fa1"] == 220.0, l[1]
print("batched rows ok")
PY
python3 bench/report.py "$dir/out5/results.json" --md "$dir/r5.md" --png "$dir/r5.png" \
  || fail "report.py batched"
grep -q "^## Many sequences at once (batched decode)" "$dir/r5.md" || fail "batched section"
grep -q "^micro q4_k_m, routing locality 0, arena 25%:" "$dir/r5.md" || fail "batched placement"
grep -Eq "^\| 2 \| [0-9,.]+ \| [0-9.]+ / [0-9.]+ \| 220.0 \(200.0 / 220.0\) \| [0-9.]+x \|" "$dir/r5.md" \
  || fail "batched row: $(grep '^| 2 |' "$dir/r5.md")"
echo PASS
