#!/usr/bin/env bash
# bench-exact.sh - whether a virtual-clock run is exact where users run it (`make
# bench-exact`): N runs (5) with one seed of each of two points,
#   repeat  calibrate's run-to-run point (tests/scenarios/repeat-point.toml: two H-TCP flows,
#           20 Mbit/s, 42 ms, 20 % BDP, the second from 5 s, 30 s),
#   p0-250  [P0]'s 250 Mbit/s x 42 ms point, two H-TCP flows from the start, 30 s
#           (tests/scenarios/speed-two-flows.toml, paper profile, point 0),
# in three settings:
#   quiet   one guest at a time, nothing else of ours running;
#   loaded  beside two CPU-bound processes and a second guest (another run, looping);
#   clone   from a second clone of this commit at another path (CLONE), built there with
#           make, writing into other results directories.
# Prints per point the 3 x N runs' result digests and how many equal the first quiet run's
# (and `cctl bench diff`'s first difference for those that do not); exits 1 unless all
# are equal. Environment: N (5), SEED (7), OUT (results/exact/<UTC time>), CLONE
# (/tmp/cctl-exact/a-second-clone/at-another-path), SETS ("quiet loaded clone"), POINTS
# ("repeat p0-250").
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
N=${N:-5}
SEED=${SEED:-7}
OUT=${OUT:-results/exact/$(date -u +%Y%m%dT%H%M%SZ)}
CLONE=${CLONE:-/tmp/cctl-exact/a-second-clone/at-another-path}
SETS=${SETS:-quiet loaded clone}
POINTS=${POINTS:-repeat p0-250}
[ -x target/release/cctl ] || { echo "bench-exact: target/release/cctl not found: make build" >&2; exit 2; }
# The clone is of this commit, and the binary here must be its build: a tree with changes
# builds another binary (its version says -modified).
git diff --quiet HEAD -- || { echo "bench-exact: the tree has uncommitted changes; commit them and make build first" >&2; exit 2; }
COMMIT=$(git rev-parse HEAD)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# A copy, so that a rebuild while this runs changes nothing of it.
CCTL=$OUT/cctl
cp target/release/cctl "$CCTL"

# The arguments of `cctl bench run` for point $1, under the tree $2.
point_args() {
	case $1 in
	repeat) echo "$2/tests/scenarios/repeat-point.toml --algo htcp --profile paper" ;;
	p0-250) echo "$2/tests/scenarios/speed-two-flows.toml --algo htcp --profile paper --points 0 --duration-s 30" ;;
	*) echo "bench-exact: unknown point $1 (repeat, p0-250)" >&2; exit 2 ;;
	esac
}

pids=()
stop_load() {
	for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
	pids=()
}
trap stop_load EXIT INT TERM

# Run $3 of point $2 in set $1 with the binary $4 under the tree $5, into a directory whose
# path differs in length from run to run and set to set.
run() {
	local set=$1 point=$2 i=$3 bin=$4 tree=$5 t0=$SECONDS
	local dir=$OUT/$set/$point/run-$i$(printf '%*s' "$i" '' | tr ' ' x)
	# shellcheck disable=SC2046
	"$bin" bench run $(point_args "$point" "$tree") --seed "$SEED" --jobs 1 --clock virtual \
		--vm always --no-html --resume "$dir" >"$dir.log" 2>&1 ||
		{ echo "bench-exact: $set $point run $i failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
	echo "bench-exact: $set $point run $i: $((SECONDS - t0)) s wall, load $(cut -d' ' -f1 /proc/loadavg)"
}

for set in $SETS; do
	bin=$CCTL tree=$REPO
	case $set in
	quiet) ;;
	loaded)
		for _ in 1 2; do
			setsid sh -c 'while :; do :; done' &
			pids+=($!)
		done
		setsid bash -c "while :; do '$CCTL' bench run $REPO/tests/scenarios/repeat-point.toml \
			--algo reno --profile paper --seed 99 --jobs 1 --clock virtual --vm always --no-html \
			--out '$OUT/background' >/dev/null 2>&1; done" &
		pids+=($!)
		;;
	clone)
		if [ ! -x "$CLONE/target/release/cctl" ] || [ "$(git -C "$CLONE" rev-parse HEAD 2>/dev/null)" != "$COMMIT" ]; then
			rm -rf "$CLONE"
			mkdir -p "$(dirname "$CLONE")"
			git clone -q "$REPO" "$CLONE"
			git -C "$CLONE" checkout -q "$COMMIT"
			echo "bench-exact: building the second clone at $CLONE"
			make -C "$CLONE" build >"$OUT/clone-build.log" 2>&1 ||
				{ echo "bench-exact: building $CLONE failed, see $OUT/clone-build.log" >&2; exit 1; }
		fi
		bin=$CLONE/target/release/cctl tree=$CLONE
		echo "bench-exact: binaries: $(sha256sum "$CCTL" | cut -c1-16) here, $(sha256sum "$bin" | cut -c1-16) in the clone"
		;;
	*) echo "bench-exact: unknown set $set (quiet, loaded, clone)" >&2; exit 2 ;;
	esac
	for point in $POINTS; do
		mkdir -p "$OUT/$set/$point"
		for i in $(seq 1 "$N"); do
			run "$set" "$point" "$i" "$bin" "$tree"
		done
	done
	stop_load
done

python3 - "$OUT" "$CCTL" $POINTS <<'PY'
import glob, json, os, subprocess, sys
out, cctl, points = sys.argv[1], sys.argv[2], sys.argv[3:]
bad = 0
for point in points:
    runs = []
    for d in sorted(glob.glob(f"{out}/*/{point}/run-*")):
        if not os.path.isdir(d):
            continue
        recs = glob.glob(f"{d}/runs/*/*/run.json")
        digest = json.load(open(recs[0])).get("digest", "-") if recs else "(no run)"
        wall = json.load(open(recs[0])).get("wall_s", 0.0) if recs else 0.0
        runs.append((d[len(out) + 1:], digest, wall))
    if not runs:
        continue
    first = runs[0][1]
    same = sum(1 for r in runs if r[1] == first)
    print(f"\n{point}: {same} of {len(runs)} runs have the first run's digest {first}\n")
    print("| run | digest | traffic wall s | identical |")
    print("|---|---|---:|---|")
    for name, digest, wall in runs:
        note = "yes"
        if digest != first:
            bad += 1
            d = subprocess.run([cctl, "bench", "diff", f"{out}/{runs[0][0]}", f"{out}/{name}"],
                               capture_output=True, text=True).stdout.strip().splitlines()
            note = "no: " + (d[-1] if d else "?")
        print(f"| {name} | {digest[7:23]} | {wall:.1f} | {note} |")
sys.exit(1 if bad else 0)
PY
