#!/usr/bin/env python3
"""compare-summaries.py - two `cctl bench` results directories of the same sweep, side by side.

    scripts/compare-summaries.py [--labels A,B] [--k 4] [--metrics REGEX] DIR_A DIR_B

Checks that both hold the same runs (runs/<algo>/p<point>-r<rep>/run.json) and the same
scenario, profile, repeat and seed, and, for every (point, algorithm, metric) row of their
summary.json, that the two means are within their run-to-run spread:
    |mean_A - mean_B| <= k * s
where s is the standard deviation of the single runs' values (summary.json's per-repetition
`values`), pooled over both directories. Prints the table (mean ± standard error on each
side, |diff|, s, and diff/s) and exits 0 if everything agrees, 1 if not. Used by
scripts/slurm-bench.sh (Slurm shards merged vs one sweep) and scripts/bench-jobs.sh (--jobs 4
vs --jobs 1).
"""
import argparse
import glob
import json
import math
import os
import re
import sys

ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--labels", default="A,B", help="names of the two sides (A,B)")
ap.add_argument("--k", type=float, default=4.0, help="allowed |diff| in run-to-run standard deviations")
ap.add_argument("--metrics", default="", help="only metrics whose name matches this regex")
args = ap.parse_args()
la, lb = args.labels.split(",", 1)
k = args.k
bad = 0


def runs(d):
    pat = os.path.join(d, "runs", "*", "p*-r*", "run.json")
    return {os.path.relpath(p, d) for p in glob.glob(pat)}


def load(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)


ra, rb = runs(args.a), runs(args.b)
print(f"runs: {len(ra)} {la}, {len(rb)} {lb}, {len(ra & rb)} in both")
for p in sorted(ra - rb):
    print(f"  only in {la}: {p}")
for p in sorted(rb - ra):
    print(f"  only in {lb}: {p}")
if ra != rb or not ra:
    bad += 1

sa, sb = load(args.a), load(args.b)
for key in ("scenario", "profile", "repeat", "seed"):
    x, y = sa["metadata"].get(key), sb["metadata"].get(key)
    if x != y:
        print(f"metadata {key}: {la} {x!r}, {lb} {y!r}")
        bad += 1
rows_a = {(r["point"], r["algo"]): r for r in sa["rows"]}
rows_b = {(r["point"], r["algo"]): r for r in sb["rows"]}
for key in sorted(set(rows_a) ^ set(rows_b)):
    print(f"row p{key[0]} {key[1]} only in {la if key in rows_a else lb}")
    bad += 1


def fmt(x):
    return "NC" if x is None else f"{x:.4g}"


def agg(m):
    if m is None:
        return "-"
    s = fmt(m.get("mean"))
    if len(m.get("values", [])) > 1:
        s += f" ± {m.get('stderr', 0):.2g}"
    return s


want = re.compile(args.metrics) if args.metrics else None
table, outside, single = [], 0, False
for key in sorted(set(rows_a) & set(rows_b)):
    x_row, y_row = rows_a[key], rows_b[key]
    if x_row["n"] != y_row["n"]:
        print(f"row p{key[0]} {key[1]}: {x_row['n']} repetitions {la}, {y_row['n']} {lb}")
        bad += 1
    single |= x_row["n"] < 2 or y_row["n"] < 2
    label = f"p{key[0]} {key[1]}"
    for name in sorted(set(x_row["metrics"]) | set(y_row["metrics"])):
        if want and not want.search(name):
            continue
        x, y = x_row["metrics"].get(name), y_row["metrics"].get(name)
        mx = x.get("mean") if x else None
        my = y.get("mean") if y else None
        ratio = None
        if x is None or y is None:
            ok, diff, spread = False, None, None
        elif mx is None or my is None:
            # NaN means (not converged in every repetition) are null in summary.json.
            ok, diff, spread = mx is None and my is None, None, None
        else:
            vx, vy = x.get("values") or [], y.get("values") or []
            ss = sum((v - mx) ** 2 for v in vx) + sum((v - my) ** 2 for v in vy)
            dof = max(len(vx) - 1, 0) + max(len(vy) - 1, 0)
            spread = math.sqrt(ss / dof) if dof > 0 else 0.0
            diff = abs(mx - my)
            ratio = diff / spread if spread > 0 else None
            ok = diff <= k * spread or diff <= 1e-9 * max(1.0, abs(mx), abs(my))
        outside += not ok
        table.append((label, name, agg(x), agg(y), fmt(diff), fmt(spread),
                      "-" if ratio is None else f"{ratio:.2f}", "yes" if ok else "NO"))

print()
print("points:")
for key in sorted(rows_b):
    r = rows_b[key]
    if r["algo"] == sorted(a for p, a in rows_b if p == key[0])[0]:
        vars_ = " ".join(f"{v}={x:g}" for v, x in sorted(r["vars"].items()))
        print(f"  p{key[0]}: {vars_} rate={r['rate_mbit']:g} Mbit/s buffer={r['buffer_pkts']} pkts loss={r['loss']:g}")
print()
head = ("point algo", "metric", f"{la} mean ± se", f"{lb} mean ± se", "|diff|", "spread s", "diff/s",
        f"within {k:g}·s?")
widths = [max(len(str(row[i])) for row in table + [head]) for i in range(len(head))]
line = "  ".join(f"{{:<{w}}}" for w in widths)
print(line.format(*head))
print(line.format(*("-" * w for w in widths)))
for row in table:
    print(line.format(*row))
print()
print(f"{len(table)} metric rows, {outside} outside the spread")
if single:
    print("note: rows with a single repetition have no spread: their means must be equal; "
          "use --repeat >= 2")
bad += outside
sys.exit(1 if bad else 0)
