#!/usr/bin/env python3
"""One decode step's kernels from an ncu CSV, one line each, or summed by kernel.

Reads what `ncu --csv --metrics <the list below> generate ...` printed (the
rows before the CSV header, ncu's own lines, are skipped) and prints the
step's kernel launches: the last --launches of them (bench35's decode step
is 52), or with --from-last NAME those from the last launch whose kernel
name contains NAME on (a batch step begins with DequantRowsKernel, the
embedding; the step before it where ncu's window cut the last one short),
each with its time, DRAM bytes read, GB/s, achieved warps per
SM, issue-active share and warp instructions ("-" for a metric ncu was not
asked for), then their sum. --by-kernel sums them by kernel and grid
instead, largest first (docs/BENCHMARKS.md, runs 29 and 30: `--metrics
gpu__time_duration.sum` alone). Pure standard library (the GPU machine has
nothing else). bench/gpu_checks.sh runs it; docs/BENCHMARKS.md, run 17, has
a table it produced.

Metrics it reads (pass them to ncu with --metrics, comma-separated):
  gpu__time_duration.sum, dram__bytes_read.sum,
  sm__warps_active.avg.pct_of_peak_sustained_active,
  smsp__issue_active.avg.pct_of_peak_sustained_active,
  smsp__inst_executed.sum
"""
import argparse
import collections
import csv
import re
import sys

METRICS = ("gpu__time_duration.sum,dram__bytes_read.sum,"
           "sm__warps_active.avg.pct_of_peak_sustained_active,"
           "smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum")
WARPS_PER_SM = 64  # sm_90


def number(text):
    return float(text.replace(",", ""))


def kernels(lines):
    """Launch id -> {name, grid, block, metric: value} in launch order."""
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\")")
    rows = list(csv.reader(lines[start:]))
    col = {name: i for i, name in enumerate(rows[0])}
    out = collections.OrderedDict()
    for r in rows[1:]:
        if len(r) < len(rows[0]):
            continue
        k = out.setdefault(int(r[col["ID"]]), {"name": r[col["Kernel Name"]],
                                               "grid": r[col["Grid Size"]],
                                               "block": r[col["Block Size"]]})
        k[r[col["Metric Name"]]] = r[col["Metric Value"]]
        if r[col["Metric Name"]] == "gpu__time_duration.sum":
            k["us"] = number(r[col["Metric Value"]]) * TIME_UNITS.get(r[col["Metric Unit"]], 1e-3)
    return out


# Microseconds a unit of ncu's gpu__time_duration (nanoseconds where it says
# none that is known).
TIME_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def metric(k, name, scale=1.0):
    """k's metric `name` times scale, or None where ncu did not report it."""
    return number(k[name]) * scale if name in k else None


def cell(value, width, digits):
    return f"{'-':>{width}s}" if value is None else f"{value:{width}.{digits}f}"


def step(ks, launches, from_last):
    """The step's launches: from the last whose name holds from_last, or
    the last `launches`. A last step with fewer launches than the one
    before it was cut by ncu's window (--launch-count): the one before is
    taken, with a note on stderr."""
    kl = list(ks.values())
    if from_last:
        starts = [i for i, k in enumerate(kl) if from_last in k["name"]]
        if not starts:
            raise ValueError(f"no kernel named like {from_last!r}")
        last = kl[starts[-1]:]
        if len(starts) >= 2:
            before = kl[starts[-2]:starts[-1]]
            if len(last) < len(before):
                print(f"note: the last step holds {len(last)} launches, the one before "
                      f"{len(before)}: ncu's window cut it; summing the one before",
                      file=sys.stderr)
                return before
        return last
    return kl[-launches:]


def by_kernel(last):
    """(short name and grid, launches, us) summed, largest time first."""
    sums = collections.OrderedDict()
    for k in last:
        key = f"{short_name(k['name'])} {k['grid']}"
        n, us = sums.get(key, (0, 0.0))
        sums[key] = (n + 1, us + k.get("us", 0.0))
    return sorted(((key, n, us) for key, (n, us) in sums.items()), key=lambda t: -t[2])


def short_name(name):
    m = re.search(r"(\w+)(<[^()]*>)?\(", name)
    return m.group(1) + (m.group(2) or "") if m else name[:40]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("csv", help="ncu --csv output")
    ap.add_argument("--launches", type=int, default=52, help="the step's launches, at the end")
    ap.add_argument("--from-last", default="",
                    help="the step starts at the last kernel whose name contains this")
    ap.add_argument("--by-kernel", action="store_true", help="sum by kernel and grid")
    args = ap.parse_args(argv)
    with open(args.csv) as f:
        ks = kernels(f.read().splitlines())
    last = step(ks, args.launches, args.from_last)
    total_us = sum(k.get("us", 0.0) for k in last)
    if args.by_kernel:
        print(f"{'kernel and grid':56s} {'launches':>8s} {'us':>9s} {'us each':>8s}")
        for key, n, us in by_kernel(last):
            print(f"{key[:56]:56s} {n:8d} {us:9.1f} {us / n:8.2f}")
        print(f"total {len(last)} launches {total_us:.1f} us")
        return 0
    total_mb = 0.0
    print(f"{'kernel':36s} {'grid':>12s} {'us':>7s} {'MB':>6s} {'GB/s':>6s} "
          f"{'warps/SM':>8s} {'issue%':>6s} {'kinst':>7s}")
    for k in last:
        us = k.get("us", 0.0)
        mb = metric(k, "dram__bytes_read.sum", 1e-6)
        total_mb += mb or 0.0
        warps = metric(k, "sm__warps_active.avg.pct_of_peak_sustained_active", WARPS_PER_SM / 100)
        gbs = None if mb is None else (mb * 1e3 / us if us else 0.0)
        kinst = metric(k, "smsp__inst_executed.sum", 1e-3)
        print(f"{short_name(k['name'])[:36]:36s} {k['grid']:>12s} {us:7.2f} {cell(mb, 6, 2)} "
              f"{cell(gbs, 6, 0)} {cell(warps, 8, 1)} "
              f"{cell(metric(k, 'smsp__issue_active.avg.pct_of_peak_sustained_active'), 6, 1)} "
              f"{cell(kinst, 7, 0)}")
    print(f"total {len(last)} launches {total_us:.1f} us {total_mb:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
