#!/usr/bin/env bash
# bench-jobs.sh - what `cctl bench run --jobs N` buys and what it costs (`make bench-jobs`).
# Runs the same sweep at --jobs 1, 2 and 4 (in the 6.12 guest where the host kernel has no
# netem) and prints:
#   - the speedup of each against --jobs 1: the sweep's wall time in the guest (first run's
#     start to last run's end, from metadata.json and the runs' run.json) and cctl's whole
#     wall time (VM boot included);
#   - the CPU one run needs against its rate, from the --jobs 1 runs (cpu_busy x CPUs);
#   - fidelity: link utilisation and the scenario's metrics, --jobs 4 against --jobs 1, with
#     their run-to-run spread (scripts/compare-summaries.py).
# Environment: SCENARIO (fairness-same-rtt), ALGOS (reno,htcp), PROFILE (ci), REPEAT (3),
# RATE (10: the points at this rate in Mbit/s; POINTS=0,1 overrides), JOBS ("1 2 4"),
# VM (auto), OUT (results/bench-jobs/<UTC time>), CCTL (target/release/cctl).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
SCENARIO=${SCENARIO:-fairness-same-rtt}
ALGOS=${ALGOS:-reno,htcp}
PROFILE=${PROFILE:-ci}
REPEAT=${REPEAT:-3}
RATE=${RATE:-10}
JOBS=${JOBS:-1 2 4}
VM=${VM:-auto}
CCTL=${CCTL:-target/release/cctl}
OUT=${OUT:-results/bench-jobs/$(date -u +%Y%m%dT%H%M%SZ)}
[ -x "$CCTL" ] || { echo "bench-jobs: $CCTL not found: cargo build --release -p cctl" >&2; exit 2; }
if [ -z "${POINTS:-}" ]; then
	POINTS=$("$CCTL" bench run "$SCENARIO" --algo "$ALGOS" --profile "$PROFILE" --dry-run |
		sed -n "s/^point *\([0-9]*\): .*rate_mbit=${RATE}\([,( ]\).*/\1/p" | paste -sd, -)
	[ -n "$POINTS" ] || { echo "bench-jobs: $SCENARIO has no point at rate_mbit=$RATE" >&2; exit 2; }
fi
mkdir -p "$OUT"
echo "bench-jobs: $SCENARIO --algo $ALGOS --profile $PROFILE --points $POINTS --repeat $REPEAT, jobs $JOBS -> $OUT"
for j in $JOBS; do
	t0=$(date +%s)
	"$CCTL" bench run "$SCENARIO" --algo "$ALGOS" --profile "$PROFILE" --points "$POINTS" \
		--repeat "$REPEAT" --jobs "$j" --vm "$VM" --resume "$OUT/jobs-$j" >"$OUT/jobs-$j.log" 2>&1 ||
		{ echo "bench-jobs: --jobs $j failed, see $OUT/jobs-$j.log" >&2; tail -5 "$OUT/jobs-$j.log" >&2; exit 1; }
	echo $(($(date +%s) - t0)) >"$OUT/jobs-$j.wall"
	grep -h "warning" "$OUT/jobs-$j.log" || true
done

python3 - "$OUT" $JOBS <<'PY'
import glob, json, os, sys
out, jobs = sys.argv[1], sys.argv[2:]
def sweep(j):
    d = os.path.join(out, f"jobs-{j}")
    meta = json.load(open(os.path.join(d, "metadata.json")))
    runs = [(p, json.load(open(p))) for p in glob.glob(os.path.join(d, "runs/*/*/run.json"))]
    end = max(os.path.getmtime(p) for p, _ in runs)
    return meta, runs, end - meta["started_unix"], float(open(d + ".wall").read())
data = {j: sweep(j) for j in jobs}
base = data[jobs[0]]
print(f"\n{'jobs':>4} {'runs':>4} {'sweep wall s':>12} {'speedup':>7} {'cctl wall s':>11} {'speedup':>7}  traffic s")
for j in jobs:
    meta, runs, sw, wall = data[j]
    traffic = sum(r["spec"]["duration_s"] for _, r in runs)
    print(f"{j:>4} {len(runs):>4} {sw:>12.0f} {base[2] / sw:>7.2f} {wall:>11.0f} {base[3] / wall:>7.2f}  {traffic:.0f}")
print("\nCPU per run at --jobs", jobs[0], "(cpu_busy x CPUs of the machine the runs ran on):")
by_rate = {}
for _, r in base[1]:
    by_rate.setdefault(r["spec"]["rate_mbit"], []).append(r["cpu_busy"] * max(r.get("cpus", 0), 1))
for rate, v in sorted(by_rate.items()):
    print(f"  {rate:g} Mbit/s: {sum(v) / len(v):.2f} CPUs per run (n = {len(v)}, {min(v):.2f}..{max(v):.2f}), "
          f"{sum(v) / len(v) / rate:.4f} CPUs per Mbit/s")
PY
last=${JOBS##* }
first=${JOBS%% *}
echo
echo "fidelity: --jobs $last against --jobs $first (utilisation and the scenario's metrics):"
python3 scripts/compare-summaries.py --labels "jobs$last,jobs$first" --k 2 \
	--metrics 'M1 |M2 |M3 |M8 |M9 |CPU' "$OUT/jobs-$last" "$OUT/jobs-$first" || true
echo "results: $OUT"
