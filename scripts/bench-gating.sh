#!/usr/bin/env bash
# bench-gating.sh - how much `cctl bench check` can be trusted on a busy host (`make
# bench-gating`, issue 25). Runs the check fixture's scenario (cli/tests/fixtures/
# check-baseline.toml: two reno flows, 40 ms, 10 and 20 Mbit/s, 10 s, 2 repetitions) on
# CLOCK three times, twice on an idle host and once while two CPU-bound processes keep it
# busy, then checks the second idle run (the run-to-run floor) and the loaded run against
# the first idle one at each tolerance of TOLS (relative, no absolute slack) and prints how
# many metrics stay within.
# Environment: CLOCK (virtual), TOLS ("0.01 0.05 0.1"), OUT (results/gating/<UTC time>),
# CCTL (target/release/cctl).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CLOCK=${CLOCK:-virtual}
TOLS=${TOLS:-0.01 0.05 0.1}
CCTL=${CCTL:-target/release/cctl}
OUT=${OUT:-results/gating/$(date -u +%Y%m%dT%H%M%SZ)}
SCENARIO=cli/tests/fixtures/check-baseline.toml
[ -x "$CCTL" ] || { echo "bench-gating: $CCTL not found: cargo build --release -p cctl" >&2; exit 2; }
mkdir -p "$OUT"
burners=()
stop_load() {
	for p in "${burners[@]}"; do kill "$p" 2>/dev/null || true; done
	burners=()
}
trap stop_load EXIT INT TERM

run() {
	local t0=$SECONDS
	"$CCTL" bench run "$SCENARIO" --algo reno --profile ci --vm always --clock "$CLOCK" \
		--resume "$OUT/$1" >"$OUT/$1.log" 2>&1 ||
		{ echo "bench-gating: the $1 run failed, see $OUT/$1.log" >&2; tail -5 "$OUT/$1.log" >&2; exit 1; }
	echo "bench-gating: $1 run on the $CLOCK clock took $((SECONDS - t0)) s"
}

run idle
run idle2
for _ in 1 2; do
	sh -c 'while :; do :; done' &
	burners+=($!)
done
run loaded
stop_load

echo
echo "| tolerance (rel) | idle vs idle: within / outside / missing | loaded vs idle: within / outside / missing |"
echo "|---|---|---|"
for t in $TOLS; do
	printf 'default = { rel = %s }\n' "$t" >"$OUT/tol-$t.toml"
	for r in idle2 loaded; do
		"$CCTL" bench check "$OUT/$r" --baseline "$OUT/idle" --tolerance "$OUT/tol-$t.toml" \
			--json >"$OUT/check-$r-$t.json" || true
	done
	python3 - "$OUT/check-idle2-$t.json" "$OUT/check-loaded-$t.json" "$t" <<'PY'
import json, sys
cell = lambda v: f"{v['within']} / {len(v['outside'])} / {len(v['missing_metrics'])}"
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(f"| {sys.argv[3]} | {cell(a)} | {cell(b)} |")
PY
done
