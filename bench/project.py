#!/usr/bin/python3
"""Decode tokens/s of a checkpoint too large to run here, from measured parts.

  bench/project.py fractions --inputs bench/projection_inputs.json
      the checkpoint's expert bytes and the tier sizes as fractions of them:
      what to pass to tools/slotsim (the command is printed)
  bench/project.py predict --inputs bench/projection_inputs.json
      [--replay slotsim.json] [--results results.json] [--scenario NAME] [--json OUT]
      the prediction, with every step of the arithmetic printed

The model (docs/BENCHMARKS.md, "The 370 GiB projection"): per token, each of
the checkpoint's n_layer x n_expert_used expert lookups is served by the
device arena, the host tier (one DMA of the slice at the pinned host-to-device
rate) or the disk (a read at the disk's rate, then the same DMA). The shares
come from a slotsim replay of a routing trace recorded on bench397 at these
tier fractions (layers of the trace stand for layers of the checkpoint). The
compute per layer is measured (bench397, every expert resident). Two bounds:
serial (each layer waits for its misses: routing is known only after the
router runs; no prefetch) and overlapped (transfers hidden behind compute
and each other: perfect prefetch); the serial one is the prediction.
Pure python3 standard library.
"""
import argparse
import json
import math
import sys

GIB = 1024.0 ** 3

# ggml block sizes: type -> (elements per block, bytes per block).
BLOCKS = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18),
    "q1_0": (128, 18), "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144),
    "q5_k": (256, 176), "q6_k": (256, 210),
}


def tensor_bytes(rows, cols, type_name):
    """Bytes of a rows x cols tensor (cols along the block axis)."""
    per, size = BLOCKS[type_name]
    if cols % per:
        raise ValueError(f"{cols} columns are not whole {type_name} blocks of {per}")
    return rows * cols // per * size


def slice_bytes(ck):
    """One expert's gate + up (expert_ff rows of n_embd) and down (n_embd
    rows of expert_ff): the bytes a slot holds."""
    t = ck["expert_types"]
    e, f = ck["n_embd"], ck["expert_ff"]
    return (tensor_bytes(f, e, t["gate"]) + tensor_bytes(f, e, t["up"])
            + tensor_bytes(e, f, t["down"]))


def value(entry):
    """Inputs are {"value": v, "source": "..."}; a bare number is accepted."""
    return entry["value"] if isinstance(entry, dict) else entry


def checkpoint_facts(ck, out):
    s = slice_bytes(ck)
    n = ck["n_layer"] * ck["n_expert"]
    out(f"slice = gate {ck['expert_ff']}x{ck['n_embd']} {ck['expert_types']['gate']} + "
        f"up {ck['expert_ff']}x{ck['n_embd']} {ck['expert_types']['up']} + "
        f"down {ck['n_embd']}x{ck['expert_ff']} {ck['expert_types']['down']} = {s:,} bytes "
        f"({s / 2 ** 20:.4f} MiB)")
    total = s * n
    if ck.get("expert_bytes_total"):
        total = value(ck["expert_bytes_total"])
        s = total / n
        out(f"expert bytes given: {total / GIB:.2f} GiB over {n:,} experts -> "
            f"slice {s / 2 ** 20:.4f} MiB ({ck['expert_bytes_total'].get('source', '')})")
    else:
        out(f"experts = {ck['n_layer']} layers x {ck['n_expert']} = {n:,}; expert bytes = "
            f"{n:,} x {s:,} = {total / GIB:.2f} GiB")
    return s, n, total


def tier_fractions(inputs, out):
    ck, tiers = inputs["checkpoint"], inputs["tiers"]
    s, _, total = checkpoint_facts(ck, out)
    arena = value(tiers["device_arena_bytes"])
    host = value(tiers["host_tier_bytes"])
    fa = min(1.0, arena / total)
    fh = min(1.0 - fa, host / total)
    out(f"arena fraction = min(1, {arena / GIB:.1f} GiB / {total / GIB:.2f} GiB) = {fa:.4f}")
    out(f"host fraction  = min(1 - arena, {host / GIB:.1f} GiB / {total / GIB:.2f} GiB) = {fh:.4f}")
    out(f"disk share of expert bytes = {1 - fa - fh:.4f}")
    return fa, fh, s


def replay_shares(replay, fa, fh, policy, out):
    """(device, host, disk) shares of lookups. Without a replay: exact when
    the tiers hold every expert (steady state); otherwise a replay is needed."""
    if replay is None:
        if fa >= 1:
            out("arena holds every expert: after the first touch every lookup hits "
                "(no replay needed)")
            return 1.0, 0.0, 0.0, "arena holds every expert"
        if fa + fh >= 1:
            out("arena + host tier hold every expert: device share needs a replay; "
                "none given, so the uniform-routing estimate device = arena fraction")
            return fa, 1 - fa, 0.0, "uniform estimate (no replay)"
        raise SystemExit("project: the tiers do not hold every expert: give --replay "
                         "(slotsim --json at the fractions above)")
    row = pick_replay_row(replay, policy)
    lookups = row["lookups"]
    dev = row["hits"] / lookups
    if "disk_bytes_per_token" in row:
        # tools/slotsim --json: bytes per replayed token from each tier.
        disk = row["disk_bytes_per_token"] * row["tokens"] / row["slice_bytes"] / lookups
    elif "disk_misses" in row or "host_hits" in row:
        disk = row.get("disk_misses", lookups - row["hits"] - row.get("host_hits", 0)) / lookups
    else:
        tiers = row.get("bytes_by_tier", {})
        slice_b = row["slice_bytes"]
        disk = tiers.get("disk", row.get("bytes_disk", 0)) / slice_b / lookups
    host = row["host_hits"] / lookups if "host_hits" in row else 1 - dev - disk
    out(f"replay ({row.get('policy', policy)}): {lookups:,} lookups, device hits "
        f"{dev:.4f}, host {host:.4f}, disk {disk:.4f}")
    return dev, host, disk, f"slotsim replay, policy {row.get('policy', policy)}"


def pick_replay_row(replay, policy):
    """slotsim --json: one object, a list of rows, or {"rows"/"results": [...]};
    a row has lookups, hits and either host_hits/disk_misses or bytes by tier
    with slice_bytes."""
    rows = replay
    if isinstance(replay, dict):
        rows = replay.get("rows") or replay.get("results") or [replay]
    rows = [r for r in rows if "lookups" in r and "hits" in r]
    if not rows:
        raise SystemExit("project: no row with lookups and hits in the replay")
    same = [r for r in rows if r.get("policy") == policy]
    return (same or rows)[0]


def compute_ms(inputs, results, out):
    """Milliseconds of compute per layer and per token outside the layers."""
    c = inputs["compute"]
    if c.get("per_layer_ms") and value(c["per_layer_ms"]) is not None:
        per_layer = value(c["per_layer_ms"])
        src = c["per_layer_ms"].get("source", "") if isinstance(c["per_layer_ms"], dict) else ""
        out(f"compute per layer = {per_layer:.4f} ms ({src})")
    else:
        if results is None:
            raise SystemExit("project: compute.per_layer_ms is not set: give --results "
                             "(a bench/run.sh results.json with bench397 all resident)")
        want = c.get("from_results", {"shape": "bench397", "mix": "ud_q1_0", "locality": 0})
        resident = [r for r in results.get("sluice", []) if r.get("ok")
                    and r["shape"] == want["shape"] and r["mix"] == want["mix"]
                    and r["mode"] == "resident"]
        # With every expert resident the routing does not change the speed:
        # any locality's run will do when the wanted one is absent.
        rows = [r for r in resident if float(r["locality"]) == want["locality"]] or resident
        if not rows:
            raise SystemExit(f"project: no resident run of {want} in --results")
        model = next(m for m in results["models"] if m["name"] == rows[0]["model"])
        tok_s = rows[0]["result"]["decode_tok_s"]
        per_layer = 1000.0 / tok_s / model["n_layer"]
        out(f"compute per layer = 1000 / {tok_s:.1f} tok/s / {model['n_layer']} layers = "
            f"{per_layer:.4f} ms (measured: {rows[0]['model']}, every expert resident; "
            "embedding, head and sampling spread over its layers)")
    extra = value(c.get("extra_ms_per_token", 0)) or 0
    return per_layer, extra


def predict(inputs, replay, results, out):
    ck, bw = inputs["checkpoint"], inputs["bandwidth"]
    out(f"== {ck.get('name', 'checkpoint')}")
    fa, fh, s = tier_fractions(inputs, out)
    dev, host, disk, how = replay_shares(replay, fa, fh, inputs.get("policy", "lru"), out)
    lookups = ck["n_layer"] * ck["n_expert_used"]
    h2d = value(bw["host_to_device_gbs"]) * 1e9
    dsk = value(bw["disk_gbs"]) * 1e9
    out(f"lookups per token = {ck['n_layer']} x {ck['n_expert_used']} = {lookups}")
    host_b = lookups * host * s
    disk_b = lookups * disk * s
    out(f"host-tier bytes per token = {lookups} x {host:.4f} x {s:,.0f} = {host_b / 1e6:.3f} MB")
    out(f"disk bytes per token      = {lookups} x {disk:.4f} x {s:,.0f} = {disk_b / 1e6:.3f} MB")
    t_pcie = (host_b + disk_b) / h2d * 1e3
    t_disk = disk_b / dsk * 1e3
    out(f"PCIe time = ({host_b / 1e6:.3f} + {disk_b / 1e6:.3f}) MB / {h2d / 1e9:g} GB/s = {t_pcie:.3f} ms")
    out(f"disk time = {disk_b / 1e6:.3f} MB / {dsk / 1e9:g} GB/s = {t_disk:.3f} ms")
    per_layer, extra = compute_ms(inputs, results, out)
    t_comp = ck["n_layer"] * per_layer + extra
    out(f"compute = {ck['n_layer']} x {per_layer:.4f} + {extra:g} ms = {t_comp:.3f} ms")
    serial = t_comp + t_pcie + t_disk
    overlap = max(t_comp, t_pcie, t_disk)
    out(f"serial:     {t_comp:.3f} + {t_pcie:.3f} + {t_disk:.3f} = {serial:.3f} ms/token -> "
        f"{1000 / serial:.2f} tok/s (predicted)")
    out(f"overlapped: max({t_comp:.3f}, {t_pcie:.3f}, {t_disk:.3f}) = {overlap:.3f} ms/token -> "
        f"{1000 / overlap:.2f} tok/s (bound with perfect prefetch)")
    return {"checkpoint": ck.get("name"), "slice_bytes": s, "arena_fraction": fa,
            "host_fraction": fh, "shares": {"device": dev, "host": host, "disk": disk},
            "shares_from": how, "host_bytes_per_token": host_b, "disk_bytes_per_token": disk_b,
            "ms": {"compute": t_comp, "pcie": t_pcie, "disk": t_disk, "serial": serial,
                   "overlapped": overlap},
            "tok_s": {"serial": 1000 / serial, "overlapped": 1000 / overlap}}


def scenarios(inputs, name):
    """The inputs, or one of inputs["scenarios"] (each overrides keys of
    checkpoint / tiers / bandwidth / compute)."""
    if not name:
        return inputs
    for sc in inputs.get("scenarios", []):
        if sc["name"] == name:
            merged = json.loads(json.dumps(inputs))
            for section, over in sc.items():
                if isinstance(over, dict):
                    merged.setdefault(section, {}).update(over)
            return merged
    raise SystemExit(f"project: no scenario {name!r}")


def main(argv=None, out=print):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["fractions", "predict"])
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--scenario", default="")
    ap.add_argument("--replay", help="tools/slotsim --json output")
    ap.add_argument("--results", help="bench/run.sh results.json (compute per layer)")
    ap.add_argument("--json", help="write the prediction as JSON here")
    args = ap.parse_args(argv)
    with open(args.inputs) as f:
        inputs = scenarios(json.load(f), args.scenario)
    if args.what == "fractions":
        fa, fh, s = tier_fractions(inputs, out)
        out(f"tools/slotsim --trace TRACE --policy {inputs.get('policy', 'lru')} "
            f"--arena_fraction {fa:.4f} --host_fraction {fh:.4f} "
            f"--slice_bytes {round(s)} --json")
        return None
    replay = results = None
    if args.replay:
        with open(args.replay) as f:
            replay = json.load(f)
    if args.results:
        with open(args.results) as f:
            results = json.load(f)
    pred = predict(inputs, replay, results, out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(pred, f, indent=1)
    return pred


if __name__ == "__main__":
    main()
