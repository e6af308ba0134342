#!/usr/bin/env bash
# submit.sh - runs a `cctl bench run` sweep as a Slurm job array: N shards (bench-array.sbatch,
# at most M at a time, one per node), then the merge (bench-merge.sbatch) once every shard has
# ended, failed or not (--dependency=afterany). Prints both job ids and the results directory.
#
#   deploy/slurm/submit.sh [--wait] [--shards N] [--max-concurrent M] [--results DIR] [-- SBATCH-ARGS...]
#
#   --wait              wait for the merge job; exit with its exit code (0: complete,
#                       3: merged but runs missing, else failed)
#   --shards N          shards = array tasks 1-N (env SHARDS, default 4)
#   --max-concurrent M  array tasks running at once, the %M of --array (env MAX_CONCURRENT,
#                       default N)
#   --results DIR       results directory, on a file system every node shares (env RESULTS,
#                       default results/slurm/<scenario>-<date>); shards go to DIR/shard-K,
#                       the merge to DIR/merged, Slurm logs to DIR/logs
#   -- SBATCH-ARGS      more sbatch options for both jobs, e.g. -- --partition=bench
#                       (env SBATCH_ARGS, split on spaces, is added too)
# The sweep: env CCTL (default target/release/cctl of this repository), SCENARIO
# (fairness-same-rtt), ALGOS (reno,htcp), PROFILE (ci), CCTL_ARGS (more `cctl bench run`
# arguments, e.g. "--repeat 3").
#
# Example, 4 machines, then wait:
#   SCENARIO=rtt-unfairness ALGOS=reno,cubic,htcp PROFILE=paper deploy/slurm/submit.sh --shards 4 --wait
# Stdout: `array=<id>`, `merge=<id>`, `results=<dir>` lines (for scripts); progress on stderr.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/deploy/slurm

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}
log() { echo "submit: $*" >&2; }
die() {
	log "$*"
	exit 2
}

WAIT=0
SHARDS=${SHARDS:-4}
MAX_CONCURRENT=${MAX_CONCURRENT:-}
RESULTS=${RESULTS:-}
POLL=${POLL:-5}
extra_sbatch=()
while (($#)); do
	case $1 in
	--wait) WAIT=1 ;;
	--shards) SHARDS=${2:?--shards N} && shift ;;
	--shards=*) SHARDS=${1#*=} ;;
	--max-concurrent) MAX_CONCURRENT=${2:?--max-concurrent M} && shift ;;
	--max-concurrent=*) MAX_CONCURRENT=${1#*=} ;;
	--results) RESULTS=${2:?--results DIR} && shift ;;
	--results=*) RESULTS=${1#*=} ;;
	-h | --help) usage ;;
	--)
		shift
		extra_sbatch+=("$@")
		break
		;;
	*) die "unknown argument '$1' (--help)" ;;
	esac
	shift
done
read -r -a env_sbatch <<<"${SBATCH_ARGS:-}"
extra_sbatch+=("${env_sbatch[@]}")

MAX_CONCURRENT=${MAX_CONCURRENT:-$SHARDS}
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || die "--shards must be a positive number, not '$SHARDS'"
[[ $MAX_CONCURRENT =~ ^[1-9][0-9]*$ ]] || die "--max-concurrent must be a positive number, not '$MAX_CONCURRENT'"
command -v sbatch >/dev/null || die "sbatch not found (is this a Slurm submit host? scripts/slurm-local.sh up makes one)"

export SCENARIO=${SCENARIO:-fairness-same-rtt}
export ALGOS=${ALGOS:-reno,htcp}
export PROFILE=${PROFILE:-ci}
export CCTL_ARGS=${CCTL_ARGS:-}
CCTL=${CCTL:-target/release/cctl}
[[ $CCTL = /* ]] || CCTL=$REPO/$CCTL
[ -x "$CCTL" ] || die "cctl binary $CCTL not found: build it (cargo build --release -p cctl) or set CCTL"
export CCTL
RESULTS=${RESULTS:-results/slurm/$(basename "$SCENARIO" .toml)-$(date +%Y%m%d-%H%M%S)}
[[ $RESULTS = /* ]] || RESULTS=$REPO/$RESULTS
export RESULTS SHARDS
mkdir -p "$RESULTS/logs"

# Everything goes to the jobs through the environment (sbatch's default --export=ALL):
# ALGOS has commas, which --export=VAR=value cannot carry.
array_out=$(sbatch --parsable --array="1-$SHARDS%$MAX_CONCURRENT" \
	--job-name="cctl-$(basename "$SCENARIO" .toml)" --chdir="$REPO" \
	--output="$RESULTS/logs/shard-%a.out" "${extra_sbatch[@]}" "$HERE/bench-array.sbatch")
ARRAY_ID=${array_out%%;*}
[[ $ARRAY_ID =~ ^[0-9]+$ ]] || die "sbatch did not return a job id: $array_out"
export ARRAY_JOB_ID=$ARRAY_ID

if ! merge_out=$(sbatch --parsable --dependency="afterany:$ARRAY_ID" --kill-on-invalid-dep=no \
	--job-name="cctl-$(basename "$SCENARIO" .toml)-merge" --chdir="$REPO" \
	--output="$RESULTS/logs/merge.out" "${extra_sbatch[@]}" "$HERE/bench-merge.sbatch"); then
	log "submitting the merge job failed; cancelling array job $ARRAY_ID"
	scancel "$ARRAY_ID" || true
	exit 1
fi
MERGE_ID=${merge_out%%;*}

log "array job $ARRAY_ID: $SCENARIO --algo $ALGOS --profile $PROFILE, $SHARDS shards, at most $MAX_CONCURRENT at a time"
log "merge job $MERGE_ID: after array job $ARRAY_ID (afterany)"
log "results in $RESULTS (logs in $RESULTS/logs)"
echo "array=$ARRAY_ID"
echo "merge=$MERGE_ID"
echo "results=$RESULTS"

((WAIT)) || exit 0

# The value of field $1 (e.g. JobState) in `scontrol -o show job` output on stdin.
field() { grep -o "\b$1=[^ ]*" | head -1 | cut -d= -f2; }

log "waiting for merge job $MERGE_ID (Ctrl-C stops waiting, not the jobs)"
last=""
while :; do
	# Progress: each array task's and the merge job's state, printed when it changes.
	now=$(squeue -h -j "$ARRAY_ID,$MERGE_ID" -o '%i %T %R' 2>/dev/null | sort || true)
	if [ -n "$now" ] && [ "$now" != "$last" ]; then
		log "$(date +%T) queue: $(echo "$now" | paste -sd';' - | sed 's/;/; /g')"
		last=$now
	fi
	info=$(scontrol -o show job "$MERGE_ID" 2>/dev/null || true)
	if [ -n "$info" ]; then
		state=$(field JobState <<<"$info")
		case $state in
		PENDING | CONFIGURING | RUNNING | COMPLETING | REQUEUED | RESIZING | SUSPENDED | "") ;;
		*)
			code=$(field ExitCode <<<"$info")
			break
			;;
		esac
	else
		# Purged from the controller: ask the accounting database, if there is one.
		acct=$(sacct -X -n -P -j "$MERGE_ID" -o State,ExitCode 2>/dev/null | head -1 || true)
		[ -n "$acct" ] || die "merge job $MERGE_ID is gone and there is no accounting to ask"
		state=${acct%%|*}
		state=${state%% *}
		code=${acct#*|}
		break
	fi
	sleep "$POLL"
done

rc=${code%%:*}
sig=${code#*:}
if [[ $sig =~ ^[1-9][0-9]*$ ]]; then rc=$((128 + sig)); fi
[[ $rc =~ ^[0-9]+$ ]] || rc=1
if [ "$state" != COMPLETED ] && ((rc == 0)); then rc=1; fi
log "array job $ARRAY_ID tasks:"
scontrol -o show job "$ARRAY_ID" 2>/dev/null | awk '{
	for (i = 1; i <= NF; i++) { k = $i; sub(/=.*/, "", k); v = $i; sub(/^[^=]*=/, "", v); f[k] = v }
	printf "submit:   task %s: %s, exit %s, %s - %s\n", f["ArrayTaskId"], f["JobState"], f["ExitCode"], f["StartTime"], f["EndTime"]
	delete f }' | sort -k3n >&2 || true
log "merge job $MERGE_ID: $state, exit code $code; log $RESULTS/logs/merge.out"
exit "$rc"
