"""The batched section of bench/report.py (issue 19): for each model and
placement, aggregate decode tok/s at each number of sequences, Sluice's
every stream's time between tokens (median and p99 of the steps), llama.cpp's
best of flash attention off and on, and the ratio against issue 19's targets
(>= 2x llama.cpp at 8 and 32 sequences; at 16, resident, >= 5x Sluice's own
single stream)."""

ISSUE19_RATIO = 2.0
ISSUE19_SELF_16 = 5.0


def _fmt(v, digits=1):
    return "—" if v is None else f"{v:,.{digits}f}"


def batched_markdown(batched):
    sl = [r for r in batched.get("sluice", []) if r.get("ok")]
    ll = [r for r in batched.get("llama", []) if r.get("ok")]
    if not sl and not ll:
        return []
    lines = ["## Many sequences at once (batched decode)", "",
             "Aggregate decode tok/s of all sequences together; Sluice `batch_decode`, "
             "llama.cpp `llama-batched-bench` (S_TG, the better of -fa 0 / 1) on the same file "
             "and placement.", ""]
    keys = sorted({(r["shape"], r["mix"], float(r["locality"]), r["fraction"]) for r in sl + ll},
                  key=lambda k: (k[0], k[1], k[2], -k[3]))
    for shape, mix, loc, frac in keys:
        def pick(rows):
            return {r["sequences"]: r for r in rows if r["shape"] == shape and r["mix"] == mix
                    and float(r["locality"]) == loc and r["fraction"] == frac}
        s, l = pick(sl), pick(ll)
        place = "all resident" if frac >= 1 else f"arena {frac:.0%}"
        lines += [f"{shape} {mix}, routing locality {loc:g}, {place}:", "",
                  "| sequences | Sluice tok/s | step ms (median / p99) | llama.cpp tok/s (fa 0 / 1) "
                  "| ratio | target |", "|---|---|---|---|---|---|"]
        one = s.get(1, {}).get("decode_tok_s")
        for b in sorted(set(s) | set(l)):
            sr, lr = s.get(b, {}), l.get(b, {})
            sv, lv = sr.get("decode_tok_s"), lr.get("decode_tok_s")
            ratio = f"{sv / lv:.2f}x" if sv and lv else "—"
            target = ""
            if b in (8, 32):
                target = "met" if sv and lv and sv >= ISSUE19_RATIO * lv else f">= {ISSUE19_RATIO:g}x"
            if b == 16 and frac >= 1 and one:
                own = sv / one if sv else None
                target = (f"{own:.1f}x own single stream (>= {ISSUE19_SELF_16:g}x: "
                          f"{'met' if own and own >= ISSUE19_SELF_16 else 'not met'})")
            lines.append(f"| {b} | {_fmt(sv)} | {_fmt(sr.get('step_ms_median'), 2)} / "
                         f"{_fmt(sr.get('step_ms_p99'), 2)} | {_fmt(lv)} "
                         f"({_fmt(lr.get('decode_tok_s_fa0'))} / {_fmt(lr.get('decode_tok_s_fa1'))}) "
                         f"| {ratio} | {target} |")
        lines.append("")
    return lines
