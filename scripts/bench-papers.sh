#!/usr/bin/env bash
# bench-papers.sh - the papers' own 250 Mbit/s points on the virtual clock (`make
# bench-papers`, issue 25). T0.1 (fairness-same-rtt) at 42 ms and T0.2 (rtt-unfairness,
# flow 1 at 162 ms, flow 2 at 42 ms), both at 250 Mbit/s with a 20 % BDP drop-tail buffer,
# for ALGOS, one repetition of DURATION s each, JOBS guests at a time: on the virtual clock
# `--jobs N` starts one guest per slot, each running a shard of the run list, and combines
# them. Then one reno run of T0.1's 10 Mbit/s, 42 ms point, for the wall time at 10 Mbit/s.
# Prints each summary table, where the cwnd plots are, and the host's wall time per second
# of traffic of every run (a run's directory is born when it starts and its run.json last
# written when it ends, both on the host's clock).
# Plain keys run the variant [P0] tested (highspeed@p0, fast@p0; `cctl list --params`).
# `make bench-paper-length` runs it with [P0]'s own length and other points (600 s; T0.1 at
# 162 ms, T0.2 with flow 2 at 22 ms, no 10 Mbit/s run) into a fixed OUT, so that running it
# again resumes the runs an interruption cut short.
# Environment: ALGOS (reno,scalable,highspeed,htcp,bic,fast), DURATION (200), JOBS (2),
# T01 (rate_mbit=250,rtt_ms=42), T02 (rate_mbit=250,rtt2_ms=42), TEN (1: also the 10 Mbit/s
# reno run; 0: not), OUT (results/papers/<UTC time>), CCTL (target/release/cctl).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
ALGOS=${ALGOS:-reno,scalable,highspeed,htcp,bic,fast}
DURATION=${DURATION:-200}
JOBS=${JOBS:-2}
CCTL=${CCTL:-target/release/cctl}
T01=${T01:-rate_mbit=250,rtt_ms=42}
T02=${T02:-rate_mbit=250,rtt2_ms=42}
TEN=${TEN:-1}
OUT=${OUT:-results/papers/$(date -u +%Y%m%dT%H%M%SZ)}
[ -x "$CCTL" ] || { echo "bench-papers: $CCTL not found: cargo build --release -p cctl" >&2; exit 2; }
mkdir -p "$OUT"

# The index of the paper profile's point whose label starts with $2 in scenario $1.
point_of() {
	local p
	p=$("$CCTL" bench run "$1" --algo reno --profile paper --dry-run |
		sed -n "s/^point *\([0-9]*\): $2 (.*/\1/p")
	[ -n "$p" ] || { echo "bench-papers: $1 has no point $2" >&2; exit 2; }
	echo "$p"
}

# run NAME SCENARIO POINT ALGOS JOBS
run() {
	local t0=$SECONDS
	echo "bench-papers: $1: $2 point $3, $4, $DURATION s, $5 guest(s) ..."
	"$CCTL" bench run "$2" --algo "$4" --profile paper --points "$3" --repeat 1 \
		--duration-s "$DURATION" --clock virtual --jobs "$5" --resume "$OUT/$1" >"$OUT/$1.log" 2>&1 ||
		{ echo "bench-papers: $1 failed, see $OUT/$1.log" >&2; tail -5 "$OUT/$1.log" >&2; exit 1; }
	echo "bench-papers: $1 took $((SECONDS - t0)) s"
}

names=(t0_1 t0_2)
run t0_1 fairness-same-rtt "$(point_of fairness-same-rtt "$T01")" "$ALGOS" "$JOBS"
run t0_2 rtt-unfairness "$(point_of rtt-unfairness "$T02")" "$ALGOS" "$JOBS"
if [ "$TEN" = 1 ]; then
	run ten fairness-same-rtt "$(point_of fairness-same-rtt 'rate_mbit=10,rtt_ms=42')" reno 1
	names+=(ten)
fi

for name in "${names[@]}"; do
	echo
	echo "## $name ($OUT/$name)"
	cat "$OUT/$name/summary.md"
	echo
	echo "cwnd plots:"
	find "$OUT/$name/plots" -name '*cwnd*.png' | sort | sed 's/^/  /'
done
echo
echo "## Host wall time per second of traffic"
echo
echo "| run | rate (Mbit/s) | wall (s) | wall s per traffic s |"
echo "|---|---|---|---|"
for f in $(find "$OUT"/t0_1/slots "$OUT"/t0_2/slots "$OUT"/ten/runs -name run.json 2>/dev/null | sort); do
	d=$(dirname "$f")
	born=$(stat -c %W "$d")
	ended=$(stat -c %Y "$f")
	rate=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["rate_mbit"])' "$f")
	run=${d#"$OUT"/}
	echo "| $run | $rate | $((ended - born)) | $(python3 -c "print(f'{($ended - $born) / $DURATION:.2f}')") |"
done
