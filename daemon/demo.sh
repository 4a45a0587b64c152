#!/usr/bin/env bash
# Demo of the serving path on the committed trained model
# models/demo-qwen3moe-q8_0.gguf (a small qwen3moe trained on Debian's
# fortunes, train/README.md): starts sluiced with a CPU worker on free ports, streams a generation through
# sluicectl, asks the same through the OpenAI-compatible HTTP API with curl,
# prints a few metrics and stops the daemon with SIGTERM.
# Usage: daemon/demo.sh BAZEL [bazel flags...]   (make demo passes both)
# On a machine without Bazel (the GPU machine): SLUICE_DEMO_BIN=DIR holds
# prebuilt inspect, sluiced, sluice-worker and sluicectl (see
# tools/gpu_bundle.sh), and SLUICE_DEMO_WORKER_KIND=cuda runs the worker on
# the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
backend="${SLUICE_DEMO_WORKER_KIND:-cpu}"
# More sluiced flags, e.g. SLUICE_DEMO_FLAGS="--expert_arena_fraction=0.25
# --expert_prefetch" with a CUDA worker streams the experts through the slot
# cache (the stats and metrics below then move).
read -r -a extra_flags <<< "${SLUICE_DEMO_FLAGS:-}"
if [ -n "${SLUICE_DEMO_BIN:-}" ]; then
  bin() { echo "$SLUICE_DEMO_BIN/$1"; }
else
  bazel_bin="${1:-bazel}"; shift || true
  "$bazel_bin" build "$@" //tools:inspect //daemon:sluiced //worker:sluice-worker //clients:sluicectl
  bin() {
    case "$1" in
      inspect) echo "bazel-bin/tools/$1" ;;
      sluiced) echo "bazel-bin/daemon/sluiced" ;;
      sluice-worker) echo "bazel-bin/worker/sluice-worker" ;;
      sluicectl) echo "bazel-bin/clients/sluicectl" ;;
    esac
  }
fi
model="${SLUICE_DEMO_MODEL:-models/demo-qwen3moe-q8_0.gguf}"
echo "== inspect --summary $model"
"$(bin inspect)" --summary "$model" | tail -n 1
run=$(mktemp -d)
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then kill -KILL "$daemon_pid"; fi
  rm -rf "$run"
}
trap cleanup EXIT

"$(bin sluiced)" --model="$model" --model_id=demo --threads=2 \
  --backend="$backend" --worker_binary="$(bin sluice-worker)" \
  --grpc_address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address=127.0.0.1:0 \
  --port_file="$run/ports" "${extra_flags[@]}" 2>"$run/sluiced.log" &
daemon_pid=$!
for _ in $(seq 600); do
  [ -f "$run/ports" ] && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$run/sluiced.log"; exit 1; }
  sleep 0.1
done
[ -f "$run/ports" ] || { echo "sluiced did not start"; cat "$run/sluiced.log"; exit 1; }
grpc_port=$(sed -n 's/^grpc=//p' "$run/ports")
metrics_port=$(sed -n 's/^metrics=//p' "$run/ports")
http_port=$(sed -n 's/^http=//p' "$run/ports")
ctl=("$(bin sluicectl)" --addr="127.0.0.1:$grpc_port" --timeout=120)

echo "== sluiced log"; cat "$run/sluiced.log"
echo "== sluicectl health";  "${ctl[@]}" health
echo "== sluicectl models";  "${ctl[@]}" models
echo "== sluicectl generate (greedy, up to 48 tokens; a model trained on fortunes, so fortune-like English)"
"${ctl[@]}" generate --max_tokens=48 --stats "A fool and his money"
echo "== sluicectl generate --chat (temperature 0.8, seed 7; trained on fortunes, not on chat turns)"
"${ctl[@]}" generate --chat --max_tokens=24 --ignore_eos --temperature=0.8 --seed=7 "Tell me a fortune."
echo "== curl: the same chat through the OpenAI-compatible API (http://127.0.0.1:$http_port/v1; same text)"
curl -sS "http://127.0.0.1:$http_port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "messages": [{"role": "user", "content": "Tell me a fortune."}],
       "max_tokens": 24, "temperature": 0.8, "seed": 7, "ignore_eos": true}' |
  python3 -m json.tool --no-ensure-ascii
echo "== metrics (http://127.0.0.1:$metrics_port/metrics, excerpt)"
"${ctl[@]}" metrics | grep -E '^sluice_(device_memory_bytes|generated_tokens_total|prompt_tokens_total|worker_up|worker_rss_(anon|file)_bytes|oom_containment_mode|time_to_first_token_seconds_(sum|count)|requests_total\{outcome="ok"\}|expert_streaming|expert_arena_bytes|expert_slot_(lookups|hits|misses)_total)'

kill -TERM "$daemon_pid"
status=0
wait "$daemon_pid" || status=$?
daemon_pid=""
echo "== sluiced stopped with exit status $status"
tail -n 2 "$run/sluiced.log"
exit "$status"
