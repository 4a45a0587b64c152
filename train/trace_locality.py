#!/usr/bin/python3
"""Locality of a routing trace (memory/routing_trace.h, docs/SLOT_CACHE.md).

  /usr/bin/python3 train/trace_locality.py A.trace [B.trace ...]

For each trace prints, per layer and averaged over layers:
  reuse  share of a token's k experts that the previous token of the same
         layer also chose;
  lru@F  hit rate of a per-layer LRU of ceil(F x n_expert) experts (each
         layer its own cache; tokens replayed in order, one lookup per
         chosen expert, a token's k experts acquired together);
  top    share of all picks that go to the layer's most popular quarter of
         the experts.
"""
import math
import struct
import sys

FRACTIONS = (0.5, 0.25)


def read_trace(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n_layer, n_expert, k = struct.unpack_from("<4sIIII", data, 0)
    if magic != b"SLRT" or version != 1:
        raise SystemExit("%s: not a version 1 routing trace" % path)
    size = 4 * (2 + k)
    by_layer = [dict() for _ in range(n_layer)]
    for off in range(20, len(data), size):
        rec = struct.unpack_from("<%dI" % (2 + k), data, off)
        by_layer[rec[1]][rec[0]] = rec[2:]
    return n_layer, n_expert, k, [[d[t] for t in sorted(d)] for d in by_layer]


def lru_hits(tokens, slots):
    cache, hits, lookups = [], 0, 0
    for experts in tokens:
        for e in experts:
            lookups += 1
            if e in cache:
                hits += 1
                cache.remove(e)
            cache.append(e)
        while len(cache) > slots:
            cache.pop(0)
    return hits / max(lookups, 1)


def reuse(tokens):
    same = sum(len(set(a) & set(b)) for a, b in zip(tokens, tokens[1:]))
    return same / max(1, sum(len(b) for b in tokens[1:]))


def top_quarter(tokens, n_expert):
    counts = [0] * n_expert
    for experts in tokens:
        for e in experts:
            counts[e] += 1
    top = sorted(counts, reverse=True)[: max(1, n_expert // 4)]
    return sum(top) / max(1, sum(counts))


def main(paths):
    for path in paths:
        n_layer, n_expert, k, layers = read_trace(path)
        print("%s: %d layers, %d experts, k=%d, %d tokens" %
              (path, n_layer, n_expert, k, len(layers[0])))
        head = "layer  reuse  " + "  ".join("lru@%-4g" % f for f in FRACTIONS) + "  top25%"
        print(head)
        rows = []
        for l, tokens in enumerate(layers):
            row = [reuse(tokens)] + [lru_hits(tokens, math.ceil(f * n_expert)) for f in FRACTIONS]
            row.append(top_quarter(tokens, n_expert))
            rows.append(row)
            print("%5d  " % l + "  ".join("%6.3f" % v for v in row))
        mean = [sum(r[i] for r in rows) / len(rows) for i in range(len(rows[0]))]
        print(" mean  " + "  ".join("%6.3f" % v for v in mean))


if __name__ == "__main__":
    main(sys.argv[1:])
