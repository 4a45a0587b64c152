#!/usr/bin/env bash
# bench/daemon_streams.py end to end on the CPU: a mkmodel micro model, one
# sluiced, 1 and 3 clients of each kind; every line must report its streams,
# the aggregate rate and no failure, and the batch metrics must follow.
set -uo pipefail
mkmodel="$1" sluiced="$2" worker="$3" sluicectl="$4"
dir="${TEST_TMPDIR:-/tmp}/daemon_streams"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/bin"
cp "$sluiced" "$worker" "$sluicectl" "$dir/bin/"
"$mkmodel" --shape micro --out "$dir/m.gguf" >/dev/null 2>&1 || fail "mkmodel"
out=$(python3 bench/daemon_streams.py --bin "$dir/bin" --model "$dir/m.gguf" --streams 1,3 \
  --tokens 30 --long_prompt_words 40 -- --threads=1 --max_sequences=4 2>&1) ||
  fail "daemon_streams.py: $out"
echo "$out"
for client in sluicectl openai; do
  for n in 1 3; do
    echo "$out" | grep -Eq "^$client streams=$n tokens_each=30 wall_s=[0-9.]+ aggregate_tok_s=[0-9.]+ .* failed=0$" ||
      fail "no clean $client line for $n streams"
  done
done
[ "$(echo "$out" | grep -c '^  sluice_worker_max_sequences 4$')" = 2 ] || fail "metrics after each round"
# The timed streams around a long prompt: its tokens and the gaps' figures.
for n in 1 3; do
  echo "$out" | grep -Eq "^gaps streams=$n long_prompt_tokens=[1-9][0-9]* long_prompt_s=[0-9.]+ gap_ms median=[0-9.]+ p99=[0-9.]+ during_long_prompt median=[0-9.na]+ p99=[0-9.na]+ max=[0-9.]+ p99_over_median=[0-9.]+$" ||
    fail "no gaps line for $n streams"
done
echo PASS
