#!/bin/bash
# The inspect binary on a middle shard of the golden split set: the whole set
# opens and the last line of --summary has the exact documented form.
set -euo pipefail
source "$TEST_SRCDIR/sluice/base/testing/testing.sh"
inspect="$1"
sluice_require_goldens
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
