#!/usr/bin/env bash
# bench-fast-lock-in.sh - why FAST's two flows split the link as their α levels do at
# [P0]'s T0.2 point (`make bench-fast-lock-in`, issue 42): 250 Mbit/s, flow 1 at 162 ms,
# flow 2 at 42 ms joining at 30 s, 20 % BDP, DURATION s on the virtual clock. Runs, side by
# side: the default port (adaptive α 8/20/200), `fast@p0` ([P0]'s f_α/2 reading, levels
# 4/10/100) and `fast@p1` (one constant α = 200 for both flows) at that point, then the
# default port with the start order swapped (tests/scenarios/t0_2-swapped.toml: the 42-ms
# flow first). Prints each summary's M1 and M3 and where the cwnd plots are.
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

for name in t0_2 swapped; do
	echo
	echo "## $name ($OUT/$name)"
	"$CCTL" bench report "$OUT/$name" >/dev/null
	sed -n '/^## M1 flow1 (Mbit\/s)$/,/^## M8/p' "$OUT/$name/summary.md" | sed '$d'
	find "$OUT/$name/plots" -name '*cwnd*.png' | sort | sed 's/^/  /'
done
