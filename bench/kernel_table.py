#!/usr/bin/env python3
"""A per-kernel time table from Nsight Compute's CSV (for issue 32's profiles).

  ncu --metrics gpu__time_duration.sum --csv --page raw [--launch-skip N --launch-count M] PROGRAM ARGS > k.csv
  python3 bench/kernel_table.py k.csv [--top 25] [--iterations K] [--baseline b.csv]

Groups the launches by kernel name (the demangled name up to its first '<' or '(': one row per
kernel template), and prints count, total ms (divided by --iterations when the profile spans K
training iterations), mean us and the share of the total, largest first. --baseline subtracts
another profile's launches kernel by kernel: profile the same program for N + K and for N
iterations, and the difference is K iterations without the start-up and the evaluation.
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


def read_rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's log lines ("==PROF==") are not CSV
    rows = []
    for r in csv.DictReader(lines):
        t = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(t.replace(",", ""))
        except ValueError:
            continue  # the units row
        rows.append((short(r.get("Kernel Name", "?")), ns))
    if not rows:
        sys.exit("kernel_table: no kernel rows with gpu__time_duration.sum in " + path)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--iterations", type=float, default=1.0)
    ap.add_argument("--baseline", default="")
    a = ap.parse_args()
    rows = read_rows(a.csv)
    if a.baseline:
        base = defaultdict(lambda: [0, 0.0])
        for k, ns in read_rows(a.baseline):
            base[k][0] += 1
            base[k][1] += ns
        mine = defaultdict(lambda: [0, 0.0])
        for k, ns in rows:
            mine[k][0] += 1
            mine[k][1] += ns
        rows = []
        for k, (n, ns) in mine.items():
            dn, dns = n - base[k][0], ns - base[k][1]
            if dn > 0:
                rows.extend([(k, dns / dn)] * dn)
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
