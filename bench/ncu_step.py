#!/usr/bin/env python3
"""One decode step's kernels from an ncu CSV, one line each.

Reads what `ncu --csv --metrics <the list below> generate ...` printed (the
rows before the CSV header, ncu's own lines, are skipped) and prints the last
--launches kernel launches (bench35's decode step is 52), each with its time,
DRAM bytes read, GB/s, achieved warps per SM, issue-active share and warp
instructions, then their sum. Pure standard library (the GPU machine has
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
    return out


def short_name(name):
    m = re.search(r"(\w+)(<[^()]*>)?\(", name)
    return m.group(1) + (m.group(2) or "") if m else name[:40]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --csv output")
    ap.add_argument("--launches", type=int, default=52, help="the step's launches, at the end")
    args = ap.parse_args(argv)
    with open(args.csv) as f:
        ks = kernels(f.read().splitlines())
    last = list(ks.values())[-args.launches:]
    total_us = total_mb = 0.0
    print(f"{'kernel':36s} {'grid':>12s} {'us':>7s} {'MB':>6s} {'GB/s':>6s} "
          f"{'warps/SM':>8s} {'issue%':>6s} {'kinst':>7s}")
    for k in last:
        us = number(k["gpu__time_duration.sum"]) / 1000
        mb = number(k["dram__bytes_read.sum"]) / 1e6
        total_us += us
        total_mb += mb
        warps = number(k["sm__warps_active.avg.pct_of_peak_sustained_active"]) / 100 * WARPS_PER_SM
        print(f"{short_name(k['name'])[:36]:36s} {k['grid']:>12s} {us:7.2f} {mb:6.2f} "
              f"{mb * 1e3 / us if us else 0:6.0f} {warps:8.1f} "
              f"{number(k['smsp__issue_active.avg.pct_of_peak_sustained_active']):6.1f} "
              f"{number(k['smsp__inst_executed.sum']) / 1e3:7.0f}")
    print(f"total {len(last)} launches {total_us:.1f} us {total_mb:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
