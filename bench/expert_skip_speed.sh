#!/usr/bin/env bash
# The lossy mode's speed (issue 22; --expert_skip, CPU backend): the model's
# pages dropped from the page cache before each run (posix_fadvise
# DONTNEED: clean pages of a file nobody maps), then a short generation at
# each threshold, twice round. Prints decode and prompt tok/s, time to first
# token and the (token, expert) pairs skipped. Where the host's disk is
# itself cached (a virtual machine's), dropping the pages changes nothing
# and nothing is skipped; run it on the GPU machine. Usage:
#   bench/expert_skip_speed.sh BIN_DIR MODEL [THREADS] [THRESHOLDS...]
# BIN_DIR holds generate (tools/gpu_bundle.sh's bin/).
set -u
bin=$1 model=$2 threads=${3:-16}
shift 3 2>/dev/null || shift $#
thresholds=("$@")
[ ${#thresholds[@]} -gt 0 ] || thresholds=(0 0.1 0.2)
sync
for round in 1 2; do
  for s in "${thresholds[@]}"; do
    python3 -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); \
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$model"
    echo -n "round=$round skip=$s "
    "$bin/generate" --model "$model" --backend cpu --threads "$threads" --prompt_tokens 16 \
      --max_tokens 32 --warmup_tokens 0 --context_length 64 --temperature 10000 --seed 1 \
      --ignore_eos --json --expert_skip "$s" 2>/dev/null | tail -1 | python3 -c "
import json, sys
j = json.load(sys.stdin)
e = j['experts']
print(f\"decode_tok_s={j['decode_tok_s']:.2f} prefill_tok_s={j['prefill_tok_s']:.2f} \"
      f\"ttft_ms={j['ttft_ms']:.1f} skipped_prefill={e['prefill']['skipped']} \"
      f\"skipped_decode={e['decode']['skipped']}\")"
  done
done
