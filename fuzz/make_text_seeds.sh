#!/bin/bash
# Regenerates the committed seed inputs of the frame and tokenizer fuzzers:
#   fuzz/make_text_seeds.sh    rewrites fuzz/corpus_frame/ and fuzz/corpus_tokenizer/
# (The GGUF seeds come from bazel run //fuzz:make_seeds.)
#
# frame: each seed is a byte stream as the frame fuzzer reads it, frames
# decoded alternately as WorkerMessage and SupervisorMessage; the bodies are
# encoded by protoc from text format, so they are real messages of today's
# schema. tokenizer: the first byte picks the pre-tokenizer (bit 0: qwen35)
# and parse_special (bit 1); the rest is the text.
set -euo pipefail
cd "$(dirname "$0")/.."
fd=fuzz/corpus_frame
td=fuzz/corpus_tokenizer
rm -rf "$fd" "$td"
mkdir -p "$fd" "$td"

# One frame: 4-byte little-endian length and the body protoc encodes from
# the text-format message on stdin ($1: WorkerMessage or SupervisorMessage).
frame() {
  local body
  body=$(mktemp)
  protoc --encode="sluice.worker.v1.$1" proto/sluice/worker/v1/worker.proto > "$body"
  local n
  n=$(stat -c %s "$body")
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n & 255)) $((n >> 8 & 255)) \
    $((n >> 16 & 255)) $((n >> 24 & 255)))"
  cat "$body"
  rm -f "$body"
}

{ echo 'ready { model { model_id: "m" architecture: "qwen35moe" context_length: 256 vocab_size: 300 } device_memory { dense_bytes: 4096 } }' | frame WorkerMessage
  echo 'hello { config { model_id: "m" threads: 2 context_length: 256 heartbeat_interval_ms: 500 } shards { name: "/m.gguf" size_bytes: 1088 } tensors { name: "blk.0.ffn_gate_exps.weight" ggml_type: 8 ne: [32, 16, 4] file_offset: 640 n_bytes: 2176 routed_expert: true } }' | frame SupervisorMessage
} > "$fd/ready_hello"
{ echo 'request_id: 7 chunk { token_ids: [3, 4] text: "hi" }' | frame WorkerMessage
  echo 'request_id: 7 generate { prompt: "Hello" max_tokens: 8 parse_special: true }' | frame SupervisorMessage
  echo 'request_id: 7 done { }' | frame WorkerMessage
  echo 'request_id: 7 cancel { }' | frame SupervisorMessage
} > "$fd/generate_stream"
{ echo 'request_id: 9 tokenized { token_ids: [1, 2] pieces: ["a", "b"] piece_bytes: ["a", "b"] }' | frame WorkerMessage
  echo 'request_id: 9 tokenize { text: "<|im_start|>user" parse_special: true }' | frame SupervisorMessage
} > "$fd/tokenize"
{ echo 'stats { rss_anon_bytes: 1000 generated_tokens_total: 5 }' | frame WorkerMessage
  echo 'stats_query { }' | frame SupervisorMessage
  echo 'heartbeat { }' | frame WorkerMessage
  echo 'shutdown { }' | frame SupervisorMessage
} > "$fd/stats_shutdown"
{ echo 'request_id: 3 error { code: 3 message: "bad temperature" }' | frame WorkerMessage
  echo 'request_id: 3 generate { token_ids { ids: [1, 2, 3] } }' | frame SupervisorMessage
  echo 'fatal { code: 14 message: "no CUDA device" }' | frame WorkerMessage
} > "$fd/errors"

printf '\x00the cat sat on the mat\n\nthe end' > "$td/qwen2_words"
printf '\x01The thing is: 12345 apples, 3.5 pears!\t\xe4\xbd\xa0\xe5\xa5\xbd' > "$td/qwen35_digits_cjk"
printf '\x02<|im_start|>user\nhello<|im_end|><tool>x' > "$td/qwen2_special"
printf '\x03<|im_start|>assistant\n\xf0\x9f\x98\x80 don'"'"'t   stop<|im_end|>' > "$td/qwen35_special_emoji"
printf '\x00\xc3\x28 \xff\xfe broken utf-8 \xe2\x82' > "$td/invalid_utf8"
