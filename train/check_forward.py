#!/usr/bin/python3
"""The PyTorch forward pass of an export against Sluice's on its GGUF.

  /usr/bin/python3 train/check_forward.py --export out/demo-train \
      --model /tmp/demo-f32.gguf --generate bazel-bin/tools/generate

Prints the mean next-token NLL of the first 100 held-out entries (each with
the eos after it, from position 0: what //tests:demo_model_test measures)
under the export's weights, and the greedy continuation of a few prompts by
the script and by tools/generate (an F32 import should give the same
tokens; Q8_0 may part ways after a while).
"""
import argparse
import json
import os
import subprocess

import train_demo


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--export", required=True)
    a.add_argument("--model", required=True)
    a.add_argument("--generate", required=True)
    a.add_argument("--tokens", type=int, default=32)
    args = a.parse_args()
    import torch
    torch.set_num_threads(2)
    with open(os.path.join(args.export, "weights.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(args.export, "tokenizer.json")) as f:
        tok = train_demo.Tokenizer([tuple(m.split(" ")) for m in json.load(f)["merges"]])
    model = train_demo.build_model(torch, manifest["config"])
    train_demo.load_export(torch, model, args.export)
    model.eval()
    _, held = train_demo.read_fortunes()
    nll, count = 0.0, 0
    with torch.no_grad():
        for e in held[:100]:
            ids = (tok.encode(e) + [tok.eos])[:256]
            logits, _ = model(torch.tensor([ids]))
            nll += torch.nn.functional.cross_entropy(
                logits[0, :-1], torch.tensor(ids[1:]), reduction="sum").item()
            count += len(ids) - 1
    print("script: held-out mean NLL %.4f over %d tokens" % (nll / count, count))
    for prompt in ["A fool and his money", "The best way to", "Love is"]:
        ids = tok.encode(prompt)
        n0 = len(ids)
        with torch.no_grad():
            for _ in range(args.tokens):
                logits, _ = model(torch.tensor([ids]))
                ids.append(int(logits[0, -1].argmax()))
                if ids[-1] == tok.eos:
                    break
        mine = tok.decode(ids[n0:]).replace("<|im_end|>", "")
        out = subprocess.run([args.generate, "--model", args.model, "--prompt", prompt,
                              "--max-tokens", str(args.tokens), "--threads", "2"],
                             capture_output=True, check=True).stdout.decode()
        print("prompt %r\n  script: %r\n  sluice: %r\n  %s" %
              (prompt, mine, out, "same" if out.strip() == mine.strip() else "DIFFERENT"))


if __name__ == "__main__":
    main()
