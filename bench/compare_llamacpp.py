#!/usr/bin/python3
"""Prefill and decode speed of Sluice's CPU engine beside llama.cpp's.

Runs both on the same machine, model files and thread counts, in one run:
  Sluice:    bazel-bin/tools/parity --repeat R (prompt p3: 40 tokens as one
             batch, then 32 single-token decode steps; fastest of R)
  llama.cpp: llama-bench -p 40 -n 32 -r R -fa off (fastest sample)
Each process is pinned with taskset to the first T cores. llama.cpp is not
part of this project: build it yourself elsewhere and pass its llama-bench.

usage: bench/compare_llamacpp.py LLAMA_BENCH GOLDENS_DIR [--threads 1,2] [--repeat 10]
           [--sluice PARITY_BINARY]
Build first: bazel build -c opt //tools:parity. bazel-bin follows the last
build of anyone sharing the tree, so pass --sluice
bazel-out/k8-opt/bin/tools/parity (or a copy) to be sure which binary runs.
"""
import argparse
import json
import os
import re
import subprocess
import sys

MODELS = [
    "qwen3moe-micro-f32", "qwen3moe-tiny-q8_0", "qwen3moe-tiny-mixed",
    "qwen35moe-micro-f32", "qwen35moe-tiny-q8_0", "qwen35moe-tiny-mixed",
]


def cores(threads):
    return ",".join(str(i) for i in range(threads))


def sluice_speed(parity, goldens, model, threads, repeat):
    out = subprocess.run(
        ["taskset", "-c", cores(threads), parity,
         "--model", os.path.join(goldens, model + ".gguf"), "--goldens", goldens,
         "--threads", str(threads), "--repeat", str(repeat)],
        capture_output=True, text=True, check=False).stdout
    m = re.search(r"\.p3: .*prefill 40 tok ([0-9.]+) tok/s, decode ([0-9.]+) tok/s", out)
    if not m:
        sys.exit(f"no p3 speed line from parity for {model}:\n{out}")
    return float(m.group(1)), float(m.group(2))


def llama_speed(llama_bench, goldens, model, threads, repeat):
    out = subprocess.run(
        ["taskset", "-c", cores(threads), llama_bench,
         "-m", os.path.join(goldens, model + ".gguf"), "-p", "40", "-n", "32",
         "-t", str(threads), "-r", str(repeat), "-fa", "off", "-o", "json"],
        capture_output=True, text=True, check=True).stdout
    pp = tg = None
    for test in json.loads(out):
        best = max(test["samples_ts"])
        if test["n_prompt"] > 0:
            pp = best
        else:
            tg = best
    return pp, tg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_bench")
    ap.add_argument("goldens")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--sluice", default="bazel-bin/tools/parity")
    a = ap.parse_args()
    print("| model | threads | prefill sluice | prefill llama.cpp | ratio |"
          " decode sluice | decode llama.cpp | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for t in (int(x) for x in a.threads.split(",")):
            sp, sd = sluice_speed(a.sluice, a.goldens, model, t, a.repeat)
            lp, ld = llama_speed(a.llama_bench, a.goldens, model, t, a.repeat)
            print(f"| {model} | {t} | {sp:.0f} | {lp:.0f} | {sp / lp:.2f} |"
                  f" {sd:.0f} | {ld:.0f} | {sd / ld:.2f} |", flush=True)


if __name__ == "__main__":
    main()
