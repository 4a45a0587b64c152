#!/usr/bin/env bash
# The checks of docs/BENCHMARKS.md's "Next GPU call" that need no llama.cpp,
# in one command on the GPU machine: every sm90 test; the kernel
# switches measured on and off (with --kimi the MLA attention on tensor
# cores); batch_decode at small batches with its profile; --expert_skip on
# a disk-bound decode (bench35 at 25% through a 1.5 GB host tier); with the daemon
# in the bundle, the paced long prompt beside 8 streams; the launch shapes
# made default in run 18 (their tests with them off, resident decode on and
# off); copy, cost and host at 25%; bench35's step launch by launch under
# ncu. Prints a
# summary and leaves every log in OUT.
#
# With --kimi it runs past one call's 10 minutes (about 12, the Kimi file
# written inside): start it with setsid in the background and poll its log
# from calls chained within 30 s (docs/BENCHMARKS.md, "How the calls ...").
#
# Here: tools/gpu_carry.sh DIR --daemon (DIR/all.txz holds b/, goldens/ and
# gd2/). There, unpacked into X:
#   bench/gpu_checks.sh X/b X/goldens X/gd2 OUT [--kimi]
# --kimi also checks and times the MLA attention with fewer heads a block
# (SLUICE_CUDA_MLA_FEW_HEADS, on by default, off and on, with ncu where the
# machine has it), profiles the routed experts' products with ncu, writes
# the Kimi-K2-shape file (41.6 GB, about a minute), times its decode at
# depths 512, 4,096 and 16,384 with fewer heads and the streamed one-row
# products (SLUICE_CUDA_STREAM_GROUPED) off and on, its step kernel by
# kernel, and profiles its prompt at 25%.
set -uo pipefail
bundle="$1" goldens="$2" goldens_ds2="$3" out="$4"
kimi=0
[ "${5:-}" = "--kimi" ] && kimi=1
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$bundle/bin"
models="${SLUICE_BENCH_MODELS:-/tmp/sluice-bench-models}"
mkdir -p "$models"
step() { echo "== $* [$(date +%T)]"; }

step "mkmodel bench35 and bench397, locality 0.2 (in the background)"
b35="$models/bench35-q4_k_m-l8-loc0.2.gguf" b397="$models/bench397-ud_q1_0-l8-loc0.2.gguf"
(
  [ -f "$b35" ] || "$bin/mkmodel" --shape bench35 --mix q4_k_m --routing-locality 0.2 --out "$b35"
  [ -f "$b397" ] || "$bin/mkmodel" --shape bench397 --mix ud_q1_0 --routing-locality 0.2 \
    --n-layer 8 --out "$b397"
) > "$out/mkmodel.log" 2>&1 &
mk=$!

step "every sm90 test"
SM90_LOGS="$out/sm90" "$bundle/run.sh" "$bin" "$goldens" "$goldens_ds2" \
  --gtest_filter=-*q8_0* 2>&1 | tail -16

wait "$mk"
step "batch_decode, all resident (kinds apart has no effect on decode-only steps)"
for m in "$b35" "$b397"; do
  "$bin/batch_decode" --model "$m" --backend cuda --sequences 1,2,3,4,8 --prompt_tokens 128 \
    --decode_tokens 32 --threads 16 2>&1 |
    grep -o 'sequences=[0-9]* steps=[0-9]* decode_tok_s=[0-9.]* per_stream_tok_s=[0-9.]* step_ms_median=[0-9.]*' |
    sed "s|^|$(basename "$m"): |"
done
step "batch_decode --profile, 8 sequences, bench35"
"$bin/batch_decode" --model "$b35" --backend cuda --sequences 8 --prompt_tokens 128 \
  --decode_tokens 32 --threads 16 --profile 2>&1 | grep '^profile' | sort -k3 -n -r | head -12

step "launch shapes (on by default since run 18): their sm90 tests off, then resident decode on and off (3 rounds)"
# SLUICE_CUDA_PROJECT_ONE_ROW: the unstreamed route launch at twice the
# blocks; SLUICE_CUDA_STREAM_SMALL_KB=56: streamed launches at 4 blocks an
# SM; SLUICE_CUDA_DOWN_ROWS=4: the down products at 4 rows a lane group
# (docs/CUDA_KERNELS.md). Same bits: the tests compare streamed and
# unstreamed kernels and the parity gates.
off=(SLUICE_CUDA_PROJECT_ONE_ROW=0 SLUICE_CUDA_STREAM_SMALL_KB=0 SLUICE_CUDA_DOWN_ROWS=8)
for t in decode_ops_sm90_test quant_matmul_sm90_test cuda_parity_sm90_test; do
  env "${off[@]}" SLUICE_GOLDENS="$goldens" "$bin/$t" --gtest_filter=-*q8_0* > "$out/shapes_off_$t.log" 2>&1
  echo "$t with them off: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/shapes_off_$t.log" | tr '\n' ' ')"
done
for m in "$b35" "$b397"; do
  for round in 1 2 3; do
    for shapes in on off; do
      set --
      [ "$shapes" = off ] && set -- "${off[@]}"
      env "$@" timeout 200 \
        "$bin/generate" --model "$m" --backend cuda --json --ignore_eos --threads 16 \
        --temperature 10000 --seed 1 --prompt_tokens 512 --context_length 656 --max_tokens 128 \
        --warmup_tokens 8 2>/dev/null | grep -o '"decode_tok_s": *[0-9.]*' | tr '\n' ' '
      echo " ($(basename "$m"), launch shapes $shapes, round $round)"
    done
  done
done

step "bench35 (locality 0.2) at 25%: copy, cost and host with the miss policy's estimates"
for pol in copy cost host; do
  timeout 200 "$bin/generate" --model "$b35" --backend cuda --json --ignore_eos --threads 16 \
    --temperature 10000 --seed 1 --prompt_tokens 512 --context_length 656 --max_tokens 128 \
    --warmup_tokens 8 --expert_arena_fraction 0.25 --expert_miss_policy "$pol" 2>/dev/null |
    grep -o '"decode_tok_s": *[0-9.]*\|"[a-z_]*_estimate": *[0-9.e+-]*\|"host_path_saving_s": *[0-9.e+-]*\|"host_computed": *[0-9]*' |
    tr '\n' ' '
  echo " ($pol)"
done

step "bench35 (locality 0.2) at 25%: the decode program by section (--profile)"
# generate --profile runs the program without a graph; before 68adf05 the
# routing read-back's event failed outside a capture.
timeout 200 "$bin/generate" --model "$b35" --backend cuda --ignore_eos --threads 16 \
  --temperature 10000 --seed 1 --prompt_tokens 64 --context_length 256 --max_tokens 32 \
  --expert_arena_fraction 0.25 --profile 2>&1 >/dev/null | grep '^profile decode' |
  sort -k3 -n -r | head -12

ncu=/usr/local/cuda/bin/ncu
if [ -x "$ncu" ]; then
  step "bench35's resident step under ncu, launch by launch (bench/ncu_step.py)"
  here="$(cd "$(dirname "$0")" && pwd)"
  timeout 300 "$ncu" --clock-control none --csv --metrics "$(python3 -c \
    "import sys; sys.path.insert(0, '$here'); import ncu_step; print(ncu_step.METRICS)")" \
    "$bin/generate" --model "$b35" --backend cuda --ignore_eos --threads 16 --temperature 10000 \
    --seed 1 --prompt_tokens 16 --context_length 64 --max_tokens 4 > "$out/ncu_step.csv" 2>&1
  python3 "$here/ncu_step.py" "$out/ncu_step.csv" | tee "$out/ncu_step.txt" | tail -12
fi

step "--expert_skip on a disk-bound decode: bench35 at 25%, a 1.5 GB host tier, skip 0 / 0.05 / 0.1"
for skip in 0 0.05 0.1; do
  timeout 200 "$bin/generate" --model "$b35" --device cuda --json --ignore_eos --threads 16 \
    --temperature 10000 --seed 1 --prompt_tokens 512 --ctx 656 --max_tokens 64 --warmup_tokens 8 \
    --expert_policy lru --expert_arena_fraction 0.25 --host_tier_bytes 1.5G --expert_skip "$skip" \
    2>/dev/null | grep -o '"decode_tok_s": *[0-9.]*\|"skipped": *[0-9]*' | tr '\n' ' '
  echo " (skip $skip)"
done

if [ -x "$bin/sluiced" ]; then
  # A 4,096-token prompt paced in beside 8 streams, four times (the pacer's
  # p99 over median swung between ~2x and ~7.7x from run to run before
  # 617b4f8), then once with the kinds apart off (the daemon passes
  # SLUICE_CUDA_* to its worker).
  step "daemon: 8 streams and a long prompt, four runs, then kinds apart off"
  here="$(cd "$(dirname "$0")" && pwd)"
  for run in 1 2 3 4 off; do
    split=1
    [ "$run" = off ] && split=0
    SLUICE_CUDA_SPLIT_KINDS=$split timeout 120 python3 "$here/daemon_streams.py" --bin "$bin" \
      --model "$b35" --streams 8 --tokens 256 --long_prompt_words 1415 -- --backend=cuda \
      --max_sequences=32 --context_length=8192 --threads=16 2>&1 | grep -E "^gaps" |
      sed "s|^|run $run: |"
  done
fi

if [ "$kimi" = 1 ]; then
  step "the MLA attention with fewer heads a block (on by default): its tests and its time"
  SLUICE_CUDA_MLA_FEW_HEADS=1 "$bin/mla_ops_sm90_test" 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]"
  SLUICE_CUDA_MLA_FEW_HEADS=1 SLUICE_GOLDENS_DEEPSEEK2="$goldens_ds2" \
    "$bin/cuda_parity_deepseek2_sm90_test" 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]"
  ncu=/usr/local/cuda/bin/ncu
  if [ -x "$ncu" ]; then
    for few in 0 1; do
      echo "few heads $few: $(SLUICE_CUDA_MLA_FEW_HEADS=$few timeout 120 "$ncu" \
        --kernel-name regex:MlaMmaAttend --launch-count 4 \
        --metrics gpu__time_duration.sum,launch__grid_size "$bin/mla_ops_sm90_test" \
        --gtest_filter='*TensorCores*' 2>&1 | grep -E "duration|grid_size" | tr -s ' ' | paste -sd' ')"
    done
    step "ncu: the routed experts' Q4_K products (cuda_matmul_bench --kimi)"
    timeout 200 "$ncu" --kernel-name regex:GroupedKernel --launch-skip 400 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis "$bin/cuda_matmul_bench" --kimi > "$out/ncu_experts.txt" 2>&1
    grep -E "Duration|Throughput|Occupancy|Eligible|Issued|Stall|stall" "$out/ncu_experts.txt" | head -30
  fi
  step "Kimi-K2 shape: decode at depths 512, 4,096, 16,384, few heads and streamed products off and on"
  k="$models/kimi_k2-q4_k_m-l5-loc0.gguf"
  [ -f "$k" ] || "$bin/mkmodel" --arch deepseek2 --shape kimi_k2 --mix q4_k_m \
    --routing-locality 0 --n-layer 5 --out "$k" > "$out/mkmodel_kimi.log" 2>&1
  # generate on the Kimi file after a prompt of $1 tokens (the rest: its flags).
  kimi() {
    local depth="$1"
    shift
    timeout 200 "$bin/generate" --model "$k" --device cuda --ignore_eos --threads 16 \
      --temperature 10000 --seed 1 --prompt_tokens "$depth" --ctx $((depth + 144)) "$@"
  }
  # The JSON report's fields named in $@, on one line.
  fields() {
    local pattern
    pattern="$(printf '"%s": *[0-9.]*\\|' "$@")"
    grep -o "${pattern%\\|}" | tr '\n' ' '
  }
  quarter=(--expert_policy lru --expert_arena_fraction 0.25 --expert_miss_policy copy)
  for cfg in "0 0" "1 0" "0 1" "1 1" "1 1"; do
    read -r few streamed <<< "$cfg"
    for depth in 512 4096 16384; do
      SLUICE_CUDA_MLA_FEW_HEADS=$few SLUICE_CUDA_STREAM_GROUPED=$streamed kimi "$depth" --json \
        --max_tokens 128 --warmup_tokens 8 2>/dev/null | fields decode_tok_s prefill_tok_s
      echo " (few heads=$few, streamed=$streamed, depth $depth)"
    done
  done
  step "Kimi-K2 shape, a step kernel by kernel at depth 512, few heads off and on"
  for few in 0 1; do
    SLUICE_CUDA_MLA_FEW_HEADS=$few kimi 512 --max_tokens 32 --time_decode_kernels 20 \
      2> "$out/kimi_kernels_$few.txt" > /dev/null
    echo "few heads $few:"; grep "^kernel_total\|^kernel_sum" "$out/kimi_kernels_$few.txt" | head -14
  done
  step "Kimi-K2 shape at 25%: the prompt, profiled (it swung 482-824 tok/s between calls)"
  kimi 512 --max_tokens 16 "${quarter[@]}" --profile 2>&1 >/dev/null | grep '^profile prefill' |
    sort -k3 -n -r | head -12
fi
step "done; logs in $out"
