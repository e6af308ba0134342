#!/usr/bin/env bash
# bench-fast-lock-in.sh - why FAST's two flows split the link as their α levels do at
# [P0]'s T0.2 point (`make bench-fast-lock-in`, issue 42): 250 Mbit/s, flow 1 at 162 ms,
# flow 2 at 42 ms joining at 30 s, 20 % BDP, DURATION s on the virtual clock. Runs, side by
# side: the default port (adaptive α 8/20/200), `fast@p0` ([P0]'s f_α/2 reading, levels
# 4/10/100) and `fast@p1` (one constant α = 200 for both flows) at that point, then the
# default port with the start order swapped (tests/scenarios/t0_2-swapped.toml: the 42-ms
# flow first). Prints each summary's M1 and M3, where the cwnd plots are, and each FAST
# flow's state at the end of its run from samples.csv (sockets in the order they opened):
# the base RTT it measured (to set against its path's), srtt, the queueing delay it
# estimates (q̂), α and its level.
# Environment: DURATION (200), JOBS (2), OUT (results/fast-lock-in), CCTL (target/release/cctl).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
DURATION=${DURATION:-200}
JOBS=${JOBS:-2}
CCTL=${CCTL:-target/release/cctl}
OUT=${OUT:-results/fast-lock-in}
[ -x "$CCTL" ] || { echo "bench-fast-lock-in: $CCTL not found: cargo build --release -p cctl" >&2; exit 2; }
mkdir -p "$OUT"
point=$("$CCTL" bench run rtt-unfairness --algo reno --profile paper --dry-run |
	sed -n 's/^point *\([0-9]*\): rate_mbit=250,rtt2_ms=42 (.*/\1/p')
[ -n "$point" ] || { echo "bench-fast-lock-in: T0.2 has no 250 Mbit/s, 42 ms point" >&2; exit 2; }

# run NAME ARGS...: one sweep into $OUT/NAME, resumed if it is there.
run() {
	local name=$1 t0=$SECONDS
	shift
	echo "bench-fast-lock-in: $name ..."
	"$CCTL" bench run "$@" --port-defaults --profile paper --repeat 1 --duration-s "$DURATION" \
		--clock virtual --resume "$OUT/$name" >"$OUT/$name.log" 2>&1 ||
		{ echo "bench-fast-lock-in: $name failed, see $OUT/$name.log" >&2; tail -5 "$OUT/$name.log" >&2; exit 1; }
	echo "bench-fast-lock-in: $name took $((SECONDS - t0)) s"
}

run t0_2 rtt-unfairness --algo fast,fast@p0,fast@p1 --points "$point" --jobs "$JOBS"
run swapped tests/scenarios/t0_2-swapped.toml --algo fast --jobs 1

# state RUN_DIR: each FAST flow's last sample (vars from the port's shared state).
state() {
	python3 - "$1" <<'PY'
import csv, json, os, sys
d = sys.argv[1]
spec = json.load(open(os.path.join(d, "run.json")))["spec"]
last = {}
for r in csv.DictReader(open(os.path.join(d, "samples.csv"))):
    if r["algo"] == "fast":
        last[r["cookie"]] = r
print("  paths: " + ", ".join(f"flow {i + 1} {f['rtt_ms']:.0f} ms from {f['start_s']:.0f} s"
                            for i, f in enumerate(spec["flows"])))
for r in sorted(last.values(), key=lambda r: int(r["cookie"])):
    v = dict(kv.split("=") for kv in r["vars"].split())
    print(f"  socket {r['cookie']}: base RTT measured {float(v['base_rtt_us']) / 1e3:.1f} ms, "
          f"srtt {int(r['srtt_us']) / 1e3:.1f} ms, q̂ {float(v['qdelay_us']) / 1e3:.1f} ms, "
          f"α {v['alpha']} (level {v['alpha_level']}), cwnd {r['cwnd']}")
PY
}

for name in t0_2 swapped; do
	echo
	echo "## $name ($OUT/$name)"
	"$CCTL" bench report "$OUT/$name" >/dev/null
	sed -n '/^## M1 flow1 (Mbit\/s)$/,/^## M8/p' "$OUT/$name/summary.md" | sed '$d'
	find "$OUT/$name/plots" -name '*cwnd*.png' | sort | sed 's/^/  /'
	for run in "$OUT/$name"/runs/*/*/; do
		echo "$(basename "$(dirname "$run")") $(basename "$run"):"
		state "$run"
	done
done
