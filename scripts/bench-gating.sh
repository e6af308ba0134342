#!/usr/bin/env bash
# bench-gating.sh - how much `cctl bench check` can be trusted on a busy host (`make
# bench-gating`, issue 25). Runs the check fixture's scenario (cli/tests/fixtures/
# check-baseline.toml: two reno flows, 40 ms, 10 and 20 Mbit/s, 10 s, 2 repetitions) on
# CLOCK twice, once on an idle host and once while two CPU-bound processes keep it busy,
# then checks the loaded run against the idle one at each tolerance of TOLS (relative, no
# absolute slack) and prints how many metrics stay within.
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
for _ in 1 2; do
	sh -c 'while :; do :; done' &
	burners+=($!)
done
run loaded
stop_load

echo
echo "| tolerance (rel) | metrics within | outside | missing |"
echo "|---|---|---|---|"
for t in $TOLS; do
	printf 'default = { rel = %s }\n' "$t" >"$OUT/tol-$t.toml"
	"$CCTL" bench check "$OUT/loaded" --baseline "$OUT/idle" --tolerance "$OUT/tol-$t.toml" --json >"$OUT/check-$t.json" || true
	python3 - "$OUT/check-$t.json" "$t" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {v['within']} | {len(v['outside'])} | {len(v['missing_metrics'])} |")
PY
done
