#!/usr/bin/python3
"""Checks that Sluice's tokenizer gives the ids train_demo.py trains with.

  /usr/bin/python3 train/check_tokenizer.py --model models/demo-qwen3moe-q8_0.gguf \
      --tokenizer out/demo-train/tokenizer.json --tokenize bazel-bin/tools/tokenize [--n 3000]

Tokenizes the first --n corpus entries (train and held-out) with the script's
Tokenizer (built from tokenizer.json's merges) and with tools/tokenize on the
GGUF, and exits 1 on the first difference.
"""
import argparse
import json
import subprocess
import sys

import train_demo


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--model", required=True)
    a.add_argument("--tokenizer", required=True)
    a.add_argument("--tokenize", required=True, help="the tools/tokenize binary")
    a.add_argument("--n", type=int, default=3000)
    args = a.parse_args()
    with open(args.tokenizer) as f:
        merges = [tuple(m.split(" ")) for m in json.load(f)["merges"]]
    tok = train_demo.Tokenizer(merges)
    train, held = train_demo.read_fortunes()
    texts = (held + train)[: args.n]
    out = subprocess.run([args.tokenize, "--model", args.model],
                         input="\0".join(texts).encode(), capture_output=True, check=True)
    lines = out.stdout.decode().split("\n")[: len(texts)]
    n_tokens = 0
    for i, (text, line) in enumerate(zip(texts, lines)):
        want = tok.encode(text)
        got = [int(x) for x in line.split()]
        n_tokens += len(want)
        if got != want:
            print("entry %d differs:\n%r\nscript %s\nsluice %s" % (i, text, want[:40], got[:40]))
            return 1
    print("%d entries, %d tokens: identical ids" % (len(texts), n_tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
