#!/usr/bin/python3
"""results.json of bench/run.sh -> a Markdown table and a PNG plot.

usage: bench/report.py results.json [more results.json ...] --md OUT.md [--png OUT.png]
           [--pcie-gbs 55.2]

Several results.json (one per command on the GPU machine) are merged. Pure
python3 standard library. The plot shows tokens/s (log scale) against the
arena fraction of expert bytes, decode and prompt side by side: a line per
Sluice model (shape, mix, routing locality), llama.cpp's placements as
squares at the fraction of expert bytes they keep on the GPU (-ngl 0 at 0),
and the PCIe ceiling of uniform routing (dotted): tok/s at which moving the
missed experts alone takes all the time. llama.cpp's figures are the better
of flash attention off and on (the setting kept is printed beside them).
Runs at a context depth > 0 (harness --depths) get their own table. Field
meanings: docs/BENCHMARKS.md.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pngplot  # noqa: E402
import report_batched  # noqa: E402

GIB = 1024.0 ** 3
# Targets of issue 10 (ratios against llama.cpp in the same run).
TARGET_25_DECODE, TARGET_25_PROMPT = 2.0, 5.0
TARGET_FULL_DECODE, TARGET_FULL_PROMPT = 1.2, 1.0
TARGET_STREAM_SHARE = 0.8
TARGET_ANON_EXCESS = 1 * GIB
# Issue 18, "Decode at the speed of the hardware": against llama.cpp at its
# best (flash attention off or on, whichever is faster). All resident vs
# all on the GPU: decode at depth 0 and at 16k, and the 512-token prompt.
# Arena 25% vs the -ncmoe placement of the same expert bytes: decode with
# uniform routing and with locality 0.2, and the prompt.
ISSUE18_FULL_DECODE, ISSUE18_FULL_PROMPT, ISSUE18_DEEP_DECODE = 1.5, 1.2, 1.5
ISSUE18_DEEP_DEPTH = 16384
ISSUE18_25_DECODE = {0.0: 2.0, 0.2: 3.0}
ISSUE18_25_PROMPT = 5.0


def load(paths):
    merged = {"machine": [], "settings": [], "models": [], "sluice": [], "llama": [],
              "batched": {"sluice": [], "llama": []}}
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        merged["machine"].append(r.get("machine", {}))
        merged["settings"].append(r.get("settings", {}))
        seen = {m["name"] for m in merged["models"]}
        merged["models"] += [m for m in r.get("models", []) if m.get("name") not in seen]
        merged["sluice"] += r.get("sluice", [])
        merged["llama"] += r.get("llama", [])
        for side in ("sluice", "llama"):
            merged["batched"][side] += r.get("batched", {}).get(side, [])
    return merged


def key(row):
    return (row["shape"], row["mix"], float(row["locality"]))


def depth(row):
    """Context depth of the timed decode (rows before --depths: 0)."""
    return int(row.get("depth", 0))


def at_depth(rows, d=0):
    return [r for r in rows if depth(r) == d]


def miss_policy(row):
    """Where the run computed decode misses (rows before the policy: copy)."""
    return row.get("miss_policy", "copy")


def shape_facts(results):
    """(shape, mix) -> n_layer, n_expert, k, slice_bytes (0 if never
    streamed), expert_bytes."""
    facts = {}
    for m in results["models"]:
        facts[(m["shape"], m["mix"])] = {"n_layer": m["n_layer"], "n_expert": m["n_expert"],
                                         "k": m["n_expert_used"], "slice_bytes": 0}
    for r in results["sluice"]:
        if r.get("ok") and (r["shape"], r["mix"]) in facts:
            f = facts[(r["shape"], r["mix"])]
            f["slice_bytes"] = max(f["slice_bytes"], r["result"]["experts"].get("slot_bytes", 0))
    for f in facts.values():
        f["expert_bytes"] = f["slice_bytes"] * f["n_layer"] * f["n_expert"]
    return facts


def decode_ceiling(facts, frac, gbs):
    """tok/s when each token's missed experts (uniform routing: a share
    1 - frac of the k per layer) must cross PCIe at gbs GB/s; None if
    unbounded or unknown."""
    miss = (1 - frac) * facts["n_layer"] * facts["k"] * facts["slice_bytes"]
    return gbs * 1e9 / miss if miss > 0 else None


def prompt_ceiling(facts, frac, gbs, prompt):
    """A long prompt touches nearly every expert of every layer once per
    micro-batch: the missed share of all expert bytes per `prompt` tokens."""
    miss = (1 - frac) * facts["expert_bytes"]
    return prompt * gbs * 1e9 / miss if miss > 0 else None


def llama_match(results, row_key, frac, facts, at=0):
    """llama.cpp's row at about the same expert bytes on the GPU: all on the
    GPU for 100%, else the -ncmoe placement nearest `frac`; at depth `at`."""
    shape, mix, loc = row_key
    rows = [r for r in at_depth(results["llama"], at) if r.get("ok") and r["shape"] == shape
            and r["mix"] == mix and r.get("n_gpu_layers", 0) > 0]
    same = [r for r in rows if float(r["locality"]) == loc]
    rows = same or rows
    if not rows:
        return None
    return min(rows, key=lambda r: (abs(r["gpu_expert_fraction"] - frac), r["n_cpu_moe"]))


def fmt(v, digits=1):
    if v is None:
        return "—"
    if isinstance(v, float) and not math.isfinite(v):
        return "—"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    return a / b if a and b else None


def kept(row, test):
    """llama.cpp's kept figure of `test` (prompt or decode) with the
    flash-attention setting it came from, when the row says (rows before
    -fa 0,1 ran with -fa 0 only and do not)."""
    if not row:
        return "—"
    v = row.get(f"{test}_tok_s")
    fa = row.get(f"{test}_fa")
    return fmt(v) + (f" (fa {fa})" if fa is not None and v is not None else "")


def both_fa(row, test):
    """'fa0 / fa1' figures of `test`, or — where only one setting ran."""
    a, b = row.get(f"{test}_tok_s_fa0"), row.get(f"{test}_tok_s_fa1")
    return "—" if a is None and b is None else f"{fmt(a)} / {fmt(b)}"


def place_name(lm):
    return "all on GPU" if lm["placement"] == "all_gpu" else f"-ncmoe {lm['n_cpu_moe']}"


def sluice_table(results, mkey, facts, gbs):
    lines = ["| arena | mode | decode tok/s | prompt tok/s | TTFT ms | hit rate (decode) "
             "| host MB/tok | disk MB/tok | CPU MB/tok | GB/s moved | prefetch acc | device peak GiB "
             "| peak RSS GiB | anon RSS GiB | PCIe ceiling tok/s | llama.cpp at same memory "
             "| its decode | its prompt | decode x | prompt x |",
             "|" + "---|" * 20]
    rows = sorted((r for r in at_depth(results["sluice"]) if key(r) == mkey),
                  key=lambda r: -r["fraction"])
    for r in rows:
        if not r.get("ok"):
            lines.append(f"| {r['fraction']:.0%} | {r['mode']} | failed: "
                         f"{r.get('error', '')[:80].replace('|', '/')} |" + " |" * 17)
            continue
        g = r["result"]
        d = g["experts"]["decode"]
        bpt = d.get("bytes_per_token", {})
        bps = d.get("bytes_per_s", {})
        lm = llama_match(results, mkey, r["fraction"], facts)
        place = place_name(lm) if lm else "—"
        ceiling = g["decode_tok_s"] and bpt.get("moved") and gbs * 1e9 / bpt["moved"]
        lines.append("| " + " | ".join([
            f"{r['fraction']:.0%}", r["mode"], fmt(g["decode_tok_s"]), fmt(g["prefill_tok_s"]),
            fmt(g["ttft_ms"]), fmt(d["hit_rate"], 3) if d["lookups"] else "—",
            fmt(bpt.get("host", 0) / 1e6, 2), fmt(bpt.get("disk", 0) / 1e6, 2),
            fmt(d.get("bytes_host_computed", 0) / d["tokens"] / 1e6 if d.get("tokens") else 0, 2),
            fmt(bps.get("moved", 0) / 1e9, 2),
            fmt(d["prefetch_accuracy"], 3) if d["prefetches_issued"] else "—",
            fmt(g["device_memory"]["peak_bytes"] / GIB, 2),
            fmt(g["rss"]["peak_bytes"] / GIB, 2), fmt(g["rss"]["anon_bytes"] / GIB, 3),
            fmt(ceiling or None, 0), place, kept(lm, "decode"), kept(lm, "prompt"),
            fmt(ratio(g["decode_tok_s"], lm and lm.get("decode_tok_s")), 2),
            fmt(ratio(g["prefill_tok_s"], lm and lm.get("prompt_tok_s")), 2)]) + " |")
    return lines


def llama_table(results, shape, mix):
    """llama.cpp's placements: the kept figure first (its fa setting in
    the last column), then both settings' figures."""
    all_rows = [r for r in results["llama"] if r["shape"] == shape and r["mix"] == mix]
    rows = at_depth(all_rows)
    if not all_rows:
        return []
    lines = [f"llama.cpp on {shape} {mix} (best of flash attention off / on):", "",
             "| locality | placement | -ngl | -ncmoe | GPU share of experts | prompt tok/s | decode tok/s "
             "| prompt fa 0 / 1 | decode fa 0 / 1 | fa kept (prompt, decode) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["locality"], -r.get("gpu_expert_fraction", 0))):
        if not r.get("ok"):
            lines.append(f"| {r['locality']:g} | failed: {r.get('error', '')[:80].replace('|', '/')} "
                         "| | | | | | | | |")
            continue
        lines.append(f"| {r['locality']:g} | {r['placement']} | {r['n_gpu_layers']} | {r['n_cpu_moe']} "
                     f"| {r['gpu_expert_fraction']:.0%} | {fmt(r.get('prompt_tok_s'))} "
                     f"| {fmt(r.get('decode_tok_s'))} | {both_fa(r, 'prompt')} | {both_fa(r, 'decode')} "
                     f"| {r.get('prompt_fa', '—')}, {r.get('decode_fa', '—')} |")
    deep = [r for r in all_rows if depth(r) > 0]
    if deep:
        lines += ["", f"llama.cpp decode at depth on {shape} {mix}:", "",
                  "| locality | placement | -ncmoe | depth | decode tok/s (fa kept) | decode fa 0 / 1 |",
                  "|---|---|---|---|---|---|"]
        for r in sorted(deep, key=lambda r: (r["locality"], -r.get("gpu_expert_fraction", 0), depth(r))):
            if not r.get("ok"):
                lines.append(f"| {r['locality']:g} | failed: "
                             f"{r.get('error', '')[:80].replace('|', '/')} | | {depth(r)} | | |")
                continue
            lines.append(f"| {r['locality']:g} | {r['placement']} | {r['n_cpu_moe']} | {depth(r)} "
                         f"| {kept(r, 'decode')} | {both_fa(r, 'decode')} |")
    return lines + [""]


def depth_table(results, mkey, facts):
    """Sluice's decode after a prompt of D tokens beside llama-bench -d D at
    the matching placement, for each fraction that ran at a depth > 0
    (depth 0: the main table's runs, after the issue's prompt)."""
    rows = [r for r in results["sluice"] if key(r) == mkey]
    deep = {(r["fraction"], r["mode"]) for r in rows if depth(r) > 0}
    rows = sorted((r for r in rows if (r["fraction"], r["mode"]) in deep),
                  key=lambda r: (-r["fraction"], r["mode"], depth(r)))
    if not rows:
        return []
    lines = ["| arena | mode | depth | decode tok/s | prompt tok/s | llama.cpp at same memory "
             "| its decode at depth | decode x | its prompt of depth | prompt x |",
             "|" + "---|" * 10]
    for r in rows:
        if not r.get("ok"):
            lines.append(f"| {r['fraction']:.0%} | {r['mode']} | {depth(r)} | failed: "
                         f"{r.get('error', '')[:80].replace('|', '/')} | | | | | | |")
            continue
        g = r["result"]
        lm = llama_match(results, mkey, r["fraction"], facts.get(mkey[:2]), at=depth(r))
        # The prompt of `depth` tokens beside llama-bench -p depth (none at
        # depth 0: the main table has the issue's prompt).
        lp = lm if lm and depth(r) > 0 and lm.get("prompt_tok_s") else None
        lines.append(f"| {r['fraction']:.0%} | {r['mode']} | {depth(r)} | {fmt(g['decode_tok_s'])} "
                     f"| {fmt(g['prefill_tok_s'])} | {place_name(lm) if lm else '—'} "
                     f"| {kept(lm, 'decode')} "
                     f"| {fmt(ratio(g['decode_tok_s'], lm and lm.get('decode_tok_s')), 2)} "
                     f"| {kept(lp, 'prompt') if lp else '—'} "
                     f"| {fmt(ratio(g['prefill_tok_s'], lp and lp.get('prompt_tok_s')), 2)} |")
    return lines + [""]


def targets(results, facts, gbs):
    """One line per target and model: measured, goal, met or by how much not."""
    out = []
    for mkey, policy in sorted({(key(r), miss_policy(r)) for r in results["sluice"]}):
        f = facts.get(mkey[:2])
        # The all-resident row has no misses: it belongs to every policy.
        ok_rows = {r["fraction"]: r["result"] for r in at_depth(results["sluice"])
                   if key(r) == mkey and r.get("ok")
                   and (miss_policy(r) == policy or r["mode"] == "resident")}
        name = f"{mkey[0]} {mkey[1]} locality {mkey[2]:g}"
        if policy != "copy":
            name += f", {policy} misses"
        for frac, want_d, want_p, label in ((0.25, TARGET_25_DECODE, TARGET_25_PROMPT, "arena 25%"),
                                            (1.0, TARGET_FULL_DECODE, TARGET_FULL_PROMPT, "all resident")):
            if frac >= 1 and policy != "copy":
                continue
            g = ok_rows.get(frac)
            lm = llama_match(results, mkey, frac, f) if f else None
            if not g or not lm:
                out.append(f"- {name}, {label}: not measured")
                continue
            other = place_name(lm)
            for what, mine, theirs, want in (("decode", g["decode_tok_s"], lm.get("decode_tok_s"), want_d),
                                             ("prompt", g["prefill_tok_s"], lm.get("prompt_tok_s"), want_p)):
                x = ratio(mine, theirs)
                verdict = "—" if x is None else ("met" if x >= want else f"NOT met ({x / want:.0%} of the goal)")
                out.append(f"- {name}, {label} vs llama.cpp {other}, {what}: "
                           f"{fmt(x, 2)}x (goal >= {want}x): {verdict}")
        streamed = [g for fr, g in ok_rows.items() if fr < 1 and g["experts"]["decode"].get("bytes_per_s")]
        if policy != "copy":
            # Misses served by PCIe and the host CPU together, per second of
            # decode (the PCIe goal is the copy policy's line).
            for fr, g in sorted(ok_rows.items()):
                d = g["experts"]["decode"]
                if fr >= 1 or not d.get("tokens") or not g["decode_tok_s"]:
                    continue
                seconds = d["tokens"] / g["decode_tok_s"]
                pcie = d["bytes_moved"] / seconds / 1e9
                cpu = d.get("bytes_host_computed", 0) / seconds / 1e9
                out.append(f"- {name}, arena {fr:.0%}: misses served at {pcie + cpu:.1f} GB/s "
                           f"({pcie:.1f} copied over PCIe, {cpu:.1f} computed by the host CPU)")
            streamed = []
        if streamed:
            g = min(streamed, key=lambda g: g["experts"]["decode"]["hit_rate"])
            rate = g["experts"]["decode"]["bytes_per_s"]["moved"] / 1e9
            # The link's rate while a step's misses are copied (timed per
            # batch of copies by the expert stream); runs before it was
            # reported have only the average over decode.
            batch = g["experts"].get("copy_bytes_per_s_estimate", 0) / 1e9
            measured = batch if batch > 0 else rate
            share = measured / gbs
            verdict = "met" if share >= TARGET_STREAM_SHARE else f"NOT met ({share:.0%} of {gbs:g} GB/s)"
            what = (f"copy batches at {batch:.1f} GB/s, {rate:.1f} GB/s averaged over decode"
                    if batch > 0 else f"{rate:.1f} GB/s")
            out.append(f"- {name}, miss-bound streaming (smallest arena): {what} "
                       f"(goal >= {TARGET_STREAM_SHARE:.0%} of {gbs:g} GB/s): {verdict}")
        for frac, g in sorted(ok_rows.items()):
            if policy != "copy":
                continue  # the same figures as the copy policy's runs
            # Only a pinned host tier (asked for with --host_tier_bytes) is
            # anonymous memory; the registered mapping is page cache.
            pinned = g.get("expert_options", {}).get("host_tier_bytes", 0) > 0
            tier = g["experts"].get("host_tier_bytes", 0) if pinned else 0
            excess = g["rss"]["anon_bytes"] - tier
            if g["device"] == "cpu":
                continue
            verdict = "met" if excess < TARGET_ANON_EXCESS else "NOT met"
            out.append(f"- {name}, arena {frac:.0%}: anonymous RSS beyond the host tier "
                       f"{excess / GIB:.3f} GiB (goal < 1 GiB): {verdict}")
    return out


def issue18_targets(results, facts):
    """Issue 18's goals, one line each per model (copy-policy runs): all
    resident against llama.cpp all on the GPU (decode, prompt, decode at
    16k), arena 25% against its -ncmoe match (decode at locality 0 and 0.2,
    prompt)."""
    out = []
    for mkey in sorted({key(r) for r in results["sluice"]}):
        f = facts.get(mkey[:2])
        name = f"{mkey[0]} {mkey[1]} locality {mkey[2]:g}"
        ok = {(r["fraction"], depth(r)): r["result"] for r in results["sluice"]
              if key(r) == mkey and r.get("ok") and miss_policy(r) == "copy"}
        goals = [(1.0, 0, "decode", ISSUE18_FULL_DECODE), (1.0, 0, "prompt", ISSUE18_FULL_PROMPT),
                 (1.0, ISSUE18_DEEP_DEPTH, "decode", ISSUE18_DEEP_DECODE)]
        if mkey[2] in ISSUE18_25_DECODE:
            goals.append((0.25, 0, "decode", ISSUE18_25_DECODE[mkey[2]]))
        goals.append((0.25, 0, "prompt", ISSUE18_25_PROMPT))
        for frac, d, what, want in goals:
            label = ("all resident" if frac >= 1 else f"arena {frac:.0%}") + (f" at depth {d}" if d else "")
            g = ok.get((frac, d))
            lm = llama_match(results, mkey, frac, f, at=d) if f else None
            if not g or not lm:
                out.append(f"- {name}, {label}, {what}: not measured (goal >= {want}x)")
                continue
            test = "decode" if what == "decode" else "prompt"
            mine = g["decode_tok_s"] if what == "decode" else g["prefill_tok_s"]
            x = ratio(mine, lm.get(f"{test}_tok_s"))
            fa = lm.get(f"{test}_fa")
            verdict = "—" if x is None else ("met" if x >= want else f"NOT met ({x / want:.0%} of the goal)")
            out.append(f"- {name}, {label} vs llama.cpp {place_name(lm)}"
                       + (f" fa {fa}" if fa is not None else "")
                       + f", {what}: {fmt(x, 2)}x (goal >= {want}x): {verdict}")
    return out


def markdown(results, gbs):
    facts = shape_facts(results)
    lines = ["# Benchmark results", ""]
    for m in results["machine"]:
        lines.append(f"- machine: {m.get('gpu', 'no GPU reported')}; {m.get('cpu', '')}; "
                     f"{m.get('cpus', '?')} CPUs; {m.get('mem_total_kb', 0) / 1024 ** 2:.0f} GiB RAM; "
                     f"Sluice commit {m.get('commit', 'unknown')}; {m.get('date_utc', '')}")
    for s in results["settings"]:
        lines.append(f"- settings: prompt {s.get('prompt')} tokens, decode {s.get('gen')} tokens "
                     f"after {s.get('warmup')} warm-up tokens, {s.get('threads')} threads, "
                     f"policy {s.get('policy')}, prefetch {'on' if s.get('prefetch') else 'off'}, "
                     f"llama.cpp repetitions {s.get('llama_reps')} (fastest kept)"
                     + (f", depths {','.join(map(str, s['depths']))}" if s.get("depths", [0]) != [0] else ""))
        if s.get("llama_flags"):
            lines.append(f"- llama.cpp build flags: {s['llama_flags']}")
        if s.get("kernel_switches"):
            lines.append("- Sluice kernel switches: " +
                         " ".join(f"{k}={v}" for k, v in s["kernel_switches"].items()))
    commits = {r.get("build_commit") for r in results["llama"] if r.get("build_commit")}
    if commits:
        lines.append(f"- llama.cpp build: {', '.join(sorted(commits))}")
    lines += ["", "## Models", "", "| model | bytes | routing (layer 0) |", "|---|---|---|"]
    for m in results["models"]:
        lines.append(f"| {m['name']} | {fmt(m.get('bytes', 0) / GIB, 2)} GiB "
                     f"| {m.get('routing', m.get('error', ''))[9:].strip()} |")
    lines += ["", f"PCIe ceiling: decode tokens/s if moving the missed experts at {gbs:g} GB/s "
              "took all the time (measured bytes per token; the plot uses uniform routing).", ""]
    for mkey in sorted({key(r) for r in results["sluice"]}):
        lines += [f"## {mkey[0]} {mkey[1]}, routing locality {mkey[2]:g}", ""]
        lines += sluice_table(results, mkey, facts, gbs) + [""]
    deep = [mkey for mkey in sorted({key(r) for r in results["sluice"]})
            if depth_table(results, mkey, facts)]
    if deep:
        lines += ["## Decode at depth", "",
                  "A prompt of `depth` tokens, then the timed decode (llama-bench -d; depth 0: "
                  "the tables above, after the issue's prompt); Sluice's prompt of `depth` "
                  "tokens beside llama-bench -p depth -n 0 (runs before 2026-12-06 have no "
                  "such llama.cpp figure).", ""]
        for mkey in deep:
            lines += [f"{mkey[0]} {mkey[1]}, routing locality {mkey[2]:g}:", ""]
            lines += depth_table(results, mkey, facts)
    for shape, mix in sorted({(r["shape"], r["mix"]) for r in results["llama"]}):
        lines += llama_table(results, shape, mix)
    lines += report_batched.batched_markdown(results["batched"])
    lines += ["## Targets of issue 10", ""] + targets(results, facts, gbs) + [""]
    lines += ["## Targets of issue 18 (llama.cpp at its best of flash attention off / on)", ""]
    lines += issue18_targets(results, facts) + [""]
    return "\n".join(lines)


PALETTE = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189),
           (255, 127, 14), (23, 190, 207), (140, 86, 75), (227, 119, 194)]
GREY = (128, 128, 128)


class Panel:
    """Axes: x linear in [0, 1], y log10 in [ylo, yhi]."""

    def __init__(self, canvas, x0, y0, w, h, ylo, yhi, title):
        self.c, self.x0, self.y0, self.w, self.h = canvas, x0, y0, w, h
        self.lo, self.hi = math.log10(ylo), math.log10(yhi)
        c = canvas
        c.text(x0 + w // 2 - len(title) * 6, y0 - 22, title, scale=2)
        c.line(x0, y0 + h, x0 + w, y0 + h, (0, 0, 0))
        c.line(x0, y0, x0, y0 + h, (0, 0, 0))
        for frac in (0, 0.1, 0.25, 0.5, 0.75, 1.0):
            x = self.px(frac)
            c.line(x, y0 + h, x, y0 + h + 4, (0, 0, 0))
            label = f"{frac:.0%}"
            c.text(x - len(label) * 3, y0 + h + 8, label)
        c.text(x0 + w // 2 - 60, y0 + h + 22, "ARENA % OF EXPERT BYTES")
        for e in range(int(self.lo), int(self.hi) + 1):
            y = self.py(10 ** e)
            c.line(x0 + 1, y, x0 + w, y, (225, 225, 225), dash=2)
            c.line(x0 - 4, y, x0, y, (0, 0, 0))
            label = f"{10 ** e:,}" if e >= 0 else f"{10 ** e:g}"
            c.text(x0 - 8 - len(label) * 6, y - 3, label)
        c.text_vertical(x0 - 62, y0 + h // 2 + 30, "TOKENS/S")

    def px(self, frac):
        return self.x0 + frac * self.w

    def py(self, v):
        v = max(v, 10 ** self.lo)
        return self.y0 + self.h - (math.log10(v) - self.lo) / (self.hi - self.lo) * self.h

    def inside(self, v):
        return v is not None and 10 ** self.lo <= v <= 10 ** self.hi

    def polyline(self, pts, color, width=2, dash=0):
        pts = [(self.px(f), self.py(v)) for f, v in pts if v is not None and v > 0]
        for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
            self.c.line(xa, ya, xb, yb, color, width=width, dash=dash)


def plot(results, path, gbs):
    facts = shape_facts(results)
    prompt = next((s.get("prompt") for s in results["settings"] if s.get("prompt")), 512)
    series = {}  # label -> (color, [(frac, decode, prompt)], marker)
    colors = {}

    def color_for(label):
        colors.setdefault(label, PALETTE[len(colors) % len(PALETTE)])
        return colors[label]

    for r in at_depth(results["sluice"]):
        if r.get("ok"):
            label = f"SLUICE {r['shape']} {r['mix']} LOC {float(r['locality']):g}"
            if miss_policy(r) != "copy":
                label += f" {miss_policy(r).upper()} MISSES"
            series.setdefault(label, []).append((r["fraction"], r["result"]["decode_tok_s"],
                                                 r["result"]["prefill_tok_s"]))
    llama = {}
    for r in at_depth(results["llama"]):
        if r.get("ok"):
            label = f"LLAMA.CPP {r['shape']} {r['mix']}"
            llama.setdefault(label, []).append((r["gpu_expert_fraction"], r.get("decode_tok_s"),
                                                r.get("prompt_tok_s")))
    ceilings = {}
    for (shape, mix), f in facts.items():
        if f["slice_bytes"]:
            fr = [i / 100 for i in range(0, 96)]
            ceilings[f"PCIE CEILING {shape} {mix}"] = [
                (x, decode_ceiling(f, x, gbs), prompt_ceiling(f, x, gbs, prompt)) for x in fr]
    values = [v for pts in list(series.values()) + list(llama.values())
              for _, d, p in pts for v in (d, p) if v]
    if not values:
        values = [1, 10]
    ylo = 10 ** math.floor(math.log10(min(values)))
    yhi = 10 ** math.ceil(math.log10(max(values) * 1.01))
    legend = len(series) + len(llama) + len(ceilings)
    width, panel_h = 1200, 420
    height = 90 + panel_h + 60 + 16 * ((legend + 1) // 2) + 20
    c = pngplot.Canvas(width, height)
    panels = [Panel(c, 110, 60, 450, panel_h, ylo, yhi, "DECODE"),
              Panel(c, 110 + 450 + 150, 60, 450, panel_h, ylo, yhi, "PROMPT")]
    entries = []
    for label, pts in sorted(ceilings.items()):
        col = color_for(label.replace("PCIE CEILING", "SLUICE") + " LOC 0")
        for i, panel in enumerate(panels):
            panel.polyline([(x, d if i == 0 else p) for x, d, p in pts
                            if panel.inside(d if i == 0 else p)], col, width=1, dash=3)
        entries.append((label, col, "dots"))
    for label, pts in sorted(series.items()):
        col = color_for(label)
        pts.sort()
        for i, panel in enumerate(panels):
            panel.polyline([(f, v[i]) for f, *v in pts], col, width=2)
            for f, *v in pts:
                if v[i]:
                    c.marker(panel.px(f), panel.py(v[i]), "circle", col)
        entries.append((label, col, "circle"))
    for label, pts in sorted(llama.items()):
        col = color_for(label)
        for i, panel in enumerate(panels):
            for f, *v in pts:
                if v[i]:
                    c.marker(panel.px(f), panel.py(v[i]), "square", col)
        entries.append((label, col, "square"))
    y = 60 + panel_h + 50
    for i, (label, col, kind) in enumerate(entries):
        x = 110 + (i % 2) * 560
        yy = y + 16 * (i // 2)
        if kind == "dots":
            c.line(x - 12, yy + 3, x + 8, yy + 3, col, dash=3)
        else:
            c.marker(x, yy + 3, kind, col)
        c.text(x + 16, yy, label)
    c.save(path)
    return c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--md", required=True)
    ap.add_argument("--png", default="",
                    help="plot to this PNG (omitted: the markdown alone, e.g. on the GPU machine)")
    ap.add_argument("--batched-png", default="",
                    help="also plot the batched runs (issue 19) to this PNG, where there are any")
    ap.add_argument("--pcie-gbs", type=float, default=55.2,
                    help="pinned host-to-device GB/s (docs: measured 55.2 on the H200)")
    args = ap.parse_args(argv)
    results = load(args.results)
    with open(args.md, "w") as f:
        f.write(markdown(results, args.pcie_gbs))
    if args.png:
        plot(results, args.png, args.pcie_gbs)
        print(f"wrote {args.md} and {args.png}")
    else:
        print(f"wrote {args.md}")
    if args.batched_png and report_batched.plot(results["batched"], args.batched_png, PALETTE):
        print(f"wrote {args.batched_png}")


if __name__ == "__main__":
    main()
