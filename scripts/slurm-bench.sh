#!/usr/bin/env bash
# slurm-bench.sh - end-to-end check that a `cctl bench` sweep split over a Slurm job array
# gives the same results as the sweep run in one piece:
#   1. scripts/slurm-local.sh up (a one-node Slurm cluster on this machine)
#   2. deploy/slurm/submit.sh --wait: the sweep as a SHARDS-task array, one task at a time
#      (%1), then the merge job (afterany) into $RESULTS/merged
#   3. the same sweep unsplit, outside Slurm: cctl bench run ... --resume $RESULTS/unsplit
#   4. compares the two (scripts/compare-summaries.py): the same runs (runs/<algo>/p<point>-r<rep>/run.json in both), the
#      same scenario/profile/repeat/seed, and for every (point, algorithm, metric) row of
#      summary.json the two means within their run-to-run spread:
#        |mean_merged - mean_unsplit| <= SPREAD_K * s
#      where s is the standard deviation of the single runs' values (summary.json's
#      per-repetition `values`), pooled over both sweeps; printed as a table, with the wall
#      time of each sweep.
#   5. scripts/slurm-local.sh down, always (also on failure or Ctrl-C).
# Exit 0 if the runs and every metric agree, 1 if not or a step failed, 2 on bad input.
# Needs root (cctl and the local cluster), python3, a built cctl (cargo build --release -p cctl).
#
# Environment:
#   SCENARIO   (fairness-same-rtt)   ALGOS (reno,htcp)   PROFILE (ci)
#   CCTL       cctl binary (target/release/cctl)
#   RESULTS    working directory, emptied first (/tmp/cctl-slurm-results); RESUME=1 keeps it
#              and continues both sweeps where they stopped
#   SHARDS     array tasks (3)
#   REPEAT     --repeat for both sweeps (5); empty: the scenario's own (the ci profiles have
#              1, which has no spread). A spread from few runs is rough: with 5 repetitions a
#              same-distribution metric lands outside 4 s about once in 4,000 rows, with 3 about
#              once in 130, and a scenario has ~100-200 rows
#   SPREAD_K   how many run-to-run standard deviations the means may differ by (4)
#   CCTL_ARGS  more `cctl bench run` arguments for both sweeps, e.g. "--vm auto --jobs 2"
#   KEEP_CLUSTER=1  leave the cluster up at the end
# Example (the defaults: 2 sweeps of 4 points x 2 algorithms x 5 repetitions of 40 s, about
# 30 min each plus set-up, longer in the VM where the kernel has no netem):
#   sudo scripts/slurm-bench.sh
#   SCENARIO=convergence-time ALGOS=htcp,reno REPEAT=3 SPREAD_K=5 scripts/slurm-bench.sh
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

log() { echo "slurm-bench: $*" >&2; }
die() {
	log "$*"
	exit 2
}

export SCENARIO=${SCENARIO:-fairness-same-rtt}
export ALGOS=${ALGOS:-reno,htcp}
export PROFILE=${PROFILE:-ci}
CCTL=${CCTL:-target/release/cctl}
[[ $CCTL = /* ]] || CCTL=$REPO/$CCTL
export CCTL
RESULTS=${RESULTS:-/tmp/cctl-slurm-results}
[[ $RESULTS = /* ]] || RESULTS=$REPO/$RESULTS
SHARDS=${SHARDS:-3}
REPEAT=${REPEAT-5}
SPREAD_K=${SPREAD_K:-4}
RESUME=${RESUME:-0}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
CCTL_ARGS=${CCTL_ARGS:-}
[ -n "$REPEAT" ] && CCTL_ARGS="--repeat $REPEAT${CCTL_ARGS:+ $CCTL_ARGS}"
export CCTL_ARGS

[ -x "$CCTL" ] || die "cctl binary $CCTL not found: cargo build --release -p cctl, or set CCTL"
command -v python3 >/dev/null || die "python3 is needed for the comparison"
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || die "SHARDS must be a positive number"
[[ $REPEAT =~ ^[0-9]*$ ]] || die "REPEAT must be a number"
[ "$(id -u)" -eq 0 ] || die "run as root (cctl bench and the local Slurm cluster need it)"

# A working directory of our own: refuse to empty a directory this script did not make.
MARK=$RESULTS/.slurm-bench
if [ "$RESUME" != 1 ] && [ -e "$RESULTS" ]; then
	if [ -e "$MARK" ] || [ -z "$(ls -A "$RESULTS")" ]; then
		rm -rf "$RESULTS"
	else
		die "$RESULTS exists and is not slurm-bench.sh's (no $MARK): choose another RESULTS"
	fi
fi
mkdir -p "$RESULTS"
touch "$MARK"

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$KEEP_CLUSTER" = 1 ]; then
		log "leaving the cluster up (KEEP_CLUSTER=1): scripts/slurm-local.sh down"
	else
		"$REPO/scripts/slurm-local.sh" down || rc=1
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$REPO/scripts/slurm-local.sh" up
eval "$("$REPO/scripts/slurm-local.sh" env)"
export SLURM_CONF

log "1/3 Slurm: $SCENARIO --algo $ALGOS --profile $PROFILE $CCTL_ARGS, $SHARDS shards, one at a time"
t0=$(date +%s)
slurm_rc=0
"$REPO/deploy/slurm/submit.sh" --shards "$SHARDS" --max-concurrent 1 --results "$RESULTS" --wait || slurm_rc=$?
slurm_s=$(($(date +%s) - t0))
log "Slurm sweep done in ${slurm_s} s (merge job exit $slurm_rc)"
if [ ! -f "$RESULTS/merged/summary.json" ]; then
	log "no $RESULTS/merged/summary.json: the Slurm sweep failed; logs in $RESULTS/logs"
	tail -n 20 "$RESULTS"/logs/*.out >&2 || true
	exit 1
fi

log "2/3 unsplit: the same sweep into $RESULTS/unsplit"
read -r -a EXTRA <<<"$CCTL_ARGS"
t0=$(date +%s)
unsplit_rc=0
"$CCTL" bench run "$SCENARIO" --algo "$ALGOS" --profile "$PROFILE" "${EXTRA[@]}" \
	--resume "$RESULTS/unsplit" || unsplit_rc=$?
unsplit_s=$(($(date +%s) - t0))
log "unsplit sweep done in ${unsplit_s} s (exit $unsplit_rc)"
((unsplit_rc == 130)) && exit 130
if ((unsplit_rc != 0)) || [ ! -f "$RESULTS/unsplit/summary.json" ]; then
	log "the unsplit sweep failed (exit $unsplit_rc)"
	exit 1
fi

log "3/3 comparing $RESULTS/merged with $RESULTS/unsplit"
cmp_rc=0
python3 "$REPO/scripts/compare-summaries.py" --labels merged,unsplit --k "$SPREAD_K" \
	"$RESULTS/merged" "$RESULTS/unsplit" || cmp_rc=$?

echo
echo "wall time: Slurm (submit to merged, $SHARDS tasks one at a time): ${slurm_s} s; unsplit: ${unsplit_s} s"
if ((slurm_rc != 0)); then
	log "the merge job exited $slurm_rc (missing or duplicated runs, see $RESULTS/logs/merge.out)"
	exit 1
fi
if ((cmp_rc != 0)); then
	log "FAIL: the Slurm sweep and the unsplit sweep differ (results in $RESULTS)"
	exit 1
fi
log "OK: the Slurm sweep matches the unsplit sweep (results in $RESULTS)"
