#!/usr/bin/env python3
"""Arms of environment settings against each other on batch_decode, in one call.

Runs `batch_decode --json` for every arm in turn, --alternations times over
(arm A, arm B, ..., then again), so that drift of the machine falls on every
arm alike, and prints a markdown table: each arm's aggregate decode tok/s at
each number of sequences, one figure an alternation, then each arm's median
against the first arm's. docs/BENCHMARKS.md, runs 27-30, has tables of this
shape. Pure standard library (the GPU machine has nothing else).

  bench/batch_ab.py --bin X/b/bin/batch_decode --model M.gguf \\
      --arm new= --arm off=SLUICE_CUDA_SPREAD_ENTRIES=0,SLUICE_CUDA_GATED_SHARED_PARTS=1 \\
      [--alternations 2] [-- further batch_decode flags]

An arm is NAME=VAR=VALUE,VAR=VALUE (NAME= alone: the environment as it is).
The default batch_decode flags are --backend cuda --prompt_tokens 128
--decode_tokens 32 --sequences 4,8,16,32; flags after -- are added.
"""
import argparse
import json
import os
import statistics
import sys

from harness_common import csv, run


def parse_arm(text):
    """'name=A=1,B=2' -> ('name', {'A': '1', 'B': '2'})."""
    name, sep, rest = text.partition("=")
    if not sep or not name:
        raise ValueError(f"an arm is NAME=VAR=VALUE,...: {text!r}")
    env = {}
    for item in filter(None, rest.split(",")):
        var, sep, value = item.partition("=")
        if not sep or not var:
            raise ValueError(f"arm {name}: not VAR=VALUE: {item!r}")
        env[var] = value
    return name, env


def rates(stdout):
    """batch_decode --json's lines -> {sequences: decode tok/s}."""
    out = {}
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        out[int(row["sequences"])] = float(row["decode_tok_s"])
    return out


def run_arm(binary, model, env, flags, timeout):
    rc, out, err, _ = run([binary, "--model", model, "--json"] + flags, timeout,
                          env={**os.environ, **env})
    if rc != 0:
        raise RuntimeError(f"batch_decode failed ({rc}): {err[-400:]}")
    return rates(out)


def table(arms, results, sequences):
    """Markdown: one row an arm (its figures an alternation), then the
    medians against the first arm's."""
    lines = ["| arm | " + " | ".join(str(s) for s in sequences) + " |",
             "|---|" + "---|" * len(sequences)]
    for name, _ in arms:
        cells = [" / ".join(f"{r.get(s, float('nan')):,.1f}" for r in results[name])
                 for s in sequences]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    base = arms[0][0]
    for name, _ in arms[1:]:
        cells = []
        for s in sequences:
            a = statistics.median(r[s] for r in results[name] if s in r)
            b = statistics.median(r[s] for r in results[base] if s in r)
            cells.append(f"{(a / b - 1) * 100:+.1f}%")
        lines.append(f"| {name} against {base} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv):
    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="batch_decode")
    ap.add_argument("--model", required=True)
    ap.add_argument("--arm", action="append", required=True, help="NAME=VAR=VALUE,...")
    ap.add_argument("--alternations", type=int, default=2)
    ap.add_argument("--sequences", default="4,8,16,32")
    ap.add_argument("--timeout", type=int, default=240, help="seconds a run")
    args = ap.parse_args(own)
    arms = [parse_arm(a) for a in args.arm]
    if len({name for name, _ in arms}) != len(arms):
        raise ValueError("two arms share a name")
    sequences = csv(args.sequences, int)
    flags = ["--backend", "cuda", "--prompt_tokens", "128", "--decode_tokens", "32",
             "--sequences", args.sequences] + extra
    results = {name: [] for name, _ in arms}
    for _ in range(args.alternations):
        for name, env in arms:
            results[name].append(run_arm(args.bin, args.model, env, flags, args.timeout))
    print(table(arms, results, sequences))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
