#!/bin/bash
# The inspect binary on a middle shard of the golden split set: the whole set
# opens and the last line of --summary has the exact documented form.
set -euo pipefail
inspect="$1"
if [[ -z "${SLUICE_GOLDENS:-}" || ! -d "${SLUICE_GOLDENS}" ]]; then
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: SLUICE_GOLDENS unset under CI=true"; exit 1; fi
  echo "SKIP: SLUICE_GOLDENS unset"; exit 0
fi
shard="${SLUICE_GOLDENS}/split/qwen3moe-tiny-q8_0-00002-of-00003.gguf"
last="$("$inspect" "$shard" --summary | tail -n 1)"
want="tensors=51 bytes=15545984 dense_bytes=2176640 expert_bytes=13369344 shards=3"
if [[ "$last" != "$want" ]]; then
  echo "FAIL: last line '$last', want '$want'"; exit 1
fi
if "$inspect" /nonexistent.gguf 2>/tmp/inspect_err_$$; then
  echo "FAIL: a missing file exited 0"; exit 1
fi
grep -q "NOT_FOUND: /nonexistent.gguf: cannot open" /tmp/inspect_err_$$ || {
  echo "FAIL: unexpected error text: $(cat /tmp/inspect_err_$$)"; exit 1; }
rm -f /tmp/inspect_err_$$
echo PASS
