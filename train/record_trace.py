#!/usr/bin/python3
"""One routing trace of a model over held-out fortunes.

  /usr/bin/python3 train/record_trace.py --model M.gguf --generate bazel-bin/tools/generate \
      --out M.trace [--entries 40] [--max_tokens 16]

Runs tools/generate --record_trace once per held-out entry (the first
--entries of at most 400 characters, each a prompt, then --max_tokens greedy
tokens) and joins the traces into one, the token indices of each run
following the previous run's (each layer's records in token order).
"""
import argparse
import os
import struct
import subprocess
import tempfile

import train_demo


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--model", required=True)
    a.add_argument("--generate", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--entries", type=int, default=40)
    a.add_argument("--max_tokens", type=int, default=16)
    args = a.parse_args()
    _, held = train_demo.read_fortunes()
    prompts = [e for e in held if len(e) <= 400][: args.entries]
    header, records, base = None, [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, prompt in enumerate(prompts):
            path = os.path.join(tmp, "%d.trace" % i)
            subprocess.run([args.generate, "--model", args.model, "--prompt", prompt,
                            "--max-tokens", str(args.max_tokens), "--ignore-eos",
                            "--record-trace", path], check=True, capture_output=True)
            data = open(path, "rb").read()
            h = struct.unpack_from("<4sIIII", data, 0)
            header = header or h
            k = h[4]
            size = 4 * (2 + k)
            run = [list(struct.unpack_from("<%dI" % (2 + k), data, off))
                   for off in range(20, len(data), size)]
            for r in run:
                r[0] += base
            base = max(r[0] for r in run) + 1
            records += run
    records.sort(key=lambda r: (r[0], r[1]))  # token-major, as decode records
    with open(args.out, "wb") as f:
        f.write(struct.pack("<4sIIII", *header))
        for r in records:
            f.write(struct.pack("<%dI" % len(r), *r))
    print("%s: %d prompts, %d tokens, %d records" % (args.out, len(prompts), base, len(records)))


if __name__ == "__main__":
    main()
