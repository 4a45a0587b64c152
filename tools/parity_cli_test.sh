#!/usr/bin/env bash
# Runs the parity binary on every golden model in one call and checks the
# exit status and the format of the last line.
set -uo pipefail
source "$TEST_SRCDIR/sluice/base/testing/testing.sh"
parity="$1"
sluice_require_goldens
models=""
for m in qwen3moe-micro-f32 qwen3moe-tiny-q8_0 qwen3moe-tiny-mixed \
         qwen35moe-micro-f32 qwen35moe-tiny-q8_0 qwen35moe-tiny-mixed; do
  models="${models:+$models,}$SLUICE_GOLDENS/$m.gguf"
done
out=$("$parity" --model "$models" --goldens "$SLUICE_GOLDENS" --threads 2)
rc=$?
echo "$out"
last=$(echo "$out" | tail -n 1)
if ! [[ "$last" =~ ^worst_max=[0-9.]+\ worst_rms=[0-9.]+\ worst_median=[0-9.]+\ top1_agree=([0-9]+)/([0-9]+)$ ]]; then
  echo "FAIL: unexpected last line: $last"; exit 1
fi
if [ "${BASH_REMATCH[2]}" -ne 864 ]; then
  echo "FAIL: expected 864 rows (6 models x (33 + 39 + 72)), got ${BASH_REMATCH[2]}"; exit 1
fi
if [ "$rc" -ne 0 ]; then echo "FAIL: parity exited $rc"; exit 1; fi
# --batch_with: each F32 micro prompt inside batches of 4 others passes and,
# with --require_identical, equals the prompt alone (one line per prompt).
micro="$SLUICE_GOLDENS/qwen3moe-micro-f32.gguf,$SLUICE_GOLDENS/qwen35moe-micro-f32.gguf"
out=$("$parity" --model "$micro" --goldens "$SLUICE_GOLDENS" --threads 2 \
        --batch_with 4 --require_identical)
rc=$?
echo "$out"
if [ "$rc" -ne 0 ]; then echo "FAIL: parity --batch_with exited $rc"; exit 1; fi
identical=$(echo "$out" | grep -c '^batch .* others=4 passes=33 .* IDENTICAL$')
if [ "$identical" -ne 6 ]; then
  echo "FAIL: expected 6 identical batched prompts, got $identical"; exit 1
fi
# Missing goldens are an error (exit != 0), never a pass.
"$parity" --model "$SLUICE_GOLDENS/qwen3moe-micro-f32.gguf" --goldens /nonexistent >/dev/null 2>&1
if [ $? -eq 0 ]; then echo "FAIL: missing goldens did not fail"; exit 1; fi
echo PASS
