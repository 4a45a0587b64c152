"""The batched section of bench/report.py (issue 19): for each model and
placement, aggregate decode tok/s at each number of sequences, Sluice's
every stream's time between tokens (median and p99 of the steps), llama.cpp's
best of flash attention off and on, and the ratio against issue 19's targets
(>= 2x llama.cpp at 8 and 32 sequences; at 16, resident, >= 5x Sluice's own
single stream), and the plot of it."""
import math

import pngplot

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


# The plot: aggregate decode tok/s (log) against sequences (log2), a colour
# per model and placement, Sluice a solid line with circles, llama.cpp a
# dashed line with squares. Drawn with pngplot (the standard library only).
PLOT_W, PLOT_H = 900, 420
PLOT_X0, PLOT_Y0, PANEL_W = 110, 60, 720


def series(batched):
    """{(shape, mix, locality, fraction): {"sluice": {B: tok/s}, "llama": {B: tok/s}}}."""
    out = {}
    for side in ("sluice", "llama"):
        for r in batched.get(side, []):
            if r.get("ok") and r.get("decode_tok_s"):
                k = (r["shape"], r["mix"], float(r["locality"]), r["fraction"])
                out.setdefault(k, {"sluice": {}, "llama": {}})[side][r["sequences"]] = \
                    r["decode_tok_s"]
    return out


class Axes:
    """x: log2 of sequences in [1, max_seq]; y: log10 of tok/s in [ylo, yhi]."""

    def __init__(self, max_seq, ylo, yhi):
        self.xhi = max(1.0, math.log2(max_seq))
        self.lo, self.hi = math.log10(ylo), math.log10(yhi)

    def px(self, seqs):
        return PLOT_X0 + math.log2(seqs) / self.xhi * PANEL_W

    def py(self, v):
        return PLOT_Y0 + PLOT_H - (math.log10(v) - self.lo) / (self.hi - self.lo) * PLOT_H


def axes_for(data):
    values = [v for s in data.values() for side in s.values() for v in side.values()]
    seqs = [b for s in data.values() for side in s.values() for b in side]
    ylo = 10 ** math.floor(math.log10(min(values)))
    yhi = 10 ** math.ceil(math.log10(max(values) * 1.01))
    return Axes(max(seqs), ylo, yhi)


def plot(batched, path, palette):
    """Writes the PNG and returns the canvas; None (nothing written) without rows."""
    data = series(batched)
    if not data:
        return None
    ax = axes_for(data)
    height = PLOT_Y0 + PLOT_H + 70 + 16 * len(data) * 2
    c = pngplot.Canvas(PLOT_W + 60, height)
    c.text(PLOT_X0 + PANEL_W // 2 - 150, PLOT_Y0 - 30, "BATCHED DECODE, ALL SEQUENCES", scale=2)
    c.line(PLOT_X0, PLOT_Y0 + PLOT_H, PLOT_X0 + PANEL_W, PLOT_Y0 + PLOT_H, (0, 0, 0))
    c.line(PLOT_X0, PLOT_Y0, PLOT_X0, PLOT_Y0 + PLOT_H, (0, 0, 0))
    b = 1
    while b <= 2 ** ax.xhi:
        x = ax.px(b)
        c.line(x, PLOT_Y0 + PLOT_H, x, PLOT_Y0 + PLOT_H + 4, (0, 0, 0))
        c.text(x - len(str(b)) * 3, PLOT_Y0 + PLOT_H + 8, str(b))
        b *= 2
    c.text(PLOT_X0 + PANEL_W // 2 - 30, PLOT_Y0 + PLOT_H + 24, "SEQUENCES")
    for e in range(int(ax.lo), int(ax.hi) + 1):
        y = ax.py(10 ** e)
        c.line(PLOT_X0 + 1, y, PLOT_X0 + PANEL_W, y, (225, 225, 225), dash=2)
        label = f"{10 ** e:,}"
        c.text(PLOT_X0 - 8 - len(label) * 6, y - 3, label)
    c.text_vertical(PLOT_X0 - 62, PLOT_Y0 + PLOT_H // 2 + 30, "TOKENS/S")
    y_legend = PLOT_Y0 + PLOT_H + 50
    for i, (key, sides) in enumerate(sorted(data.items())):
        shape, mix, loc, frac = key
        col = palette[i % len(palette)]
        place = "RESIDENT" if frac >= 1 else f"ARENA {frac:.0%}"
        for side, dash, shape_kind in (("sluice", 0, "circle"), ("llama", 4, "square")):
            pts = sorted(sides[side].items())
            for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
                c.line(ax.px(xa), ax.py(ya), ax.px(xb), ax.py(yb), col, width=2, dash=dash)
            for s, v in pts:
                c.marker(ax.px(s), ax.py(v), shape_kind, col)
            name = "SLUICE" if side == "sluice" else "LLAMA.CPP"
            yy = y_legend + 16 * (2 * i + (side == "llama"))
            c.marker(PLOT_X0, yy + 3, shape_kind, col)
            c.text(PLOT_X0 + 16, yy, f"{name} {shape} {mix} LOC {loc:g} {place}")
    c.save(path)
    return c
