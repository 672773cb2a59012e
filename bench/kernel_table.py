#!/usr/bin/env python3
"""A per-kernel time table from Nsight Compute's CSV (for issue 32's profiles).

  ncu --metrics gpu__time_duration.sum --csv --page raw [--launch-skip N --launch-count M] PROGRAM ARGS > k.csv
  python3 bench/kernel_table.py k.csv [--top 25] [--iterations K]

Groups the launches by kernel name (the demangled name up to its first '<' or '(': one row per
kernel template), and prints count, total ms (divided by --iterations when the profile spans K
training iterations), mean us and the share of the total, largest first.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = re.sub(r"^void ", "", name)
    cut = min([i for i in (name.find("<"), name.find("(")) if i >= 0] or [len(name)])
    return name[:cut]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--iterations", type=float, default=1.0)
    a = ap.parse_args()
    rows = []
    with open(a.csv, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's log lines ("==PROF==") are not CSV
    reader = csv.DictReader(lines)
    for r in reader:
        t = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(t.replace(",", ""))
        except ValueError:
            continue  # the units row
        rows.append((short(r.get("Kernel Name", "?")), ns))
    if not rows:
        sys.exit("kernel_table: no kernel rows with gpu__time_duration.sum in " + a.csv)
    total = sum(ns for _, ns in rows)
    by = defaultdict(lambda: [0, 0.0])
    for k, ns in rows:
        by[k][0] += 1
        by[k][1] += ns
    print(f"{len(rows)} launches, {total / 1e6 / a.iterations:.2f} ms of kernel time per iteration")
    print("| kernel | launches | ms / iter | mean us | share |")
    print("|---|---|---|---|---|")
    for k, (n, ns) in sorted(by.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"| {k[:90]} | {n / a.iterations:g} | {ns / 1e6 / a.iterations:.2f} | {ns / n / 1e3:.1f} | {100 * ns / total:.1f}% |")


if __name__ == "__main__":
    main()
