#!/usr/bin/env bash
# make flaky: runs test targets N times each, one run at a time, and prints a table of
# pass counts (a benchmark of the tests themselves, not a CI test).
#
#   make flaky N=10 TESTS="exporter storm sweep::a_killed_vm_sweep conform::every_port"
#
# TESTS: test targets of the workspace (tests/tests/*.rs, cli/tests/*.rs, ...), each
# optionally with `::FILTER`, a substring of test names passed to the harness (as `cargo test
# NAME` does); with no filter every test of the target runs. Each target is built once; each
# run's output is kept in target/flaky/<target>-<i>.log, and a failed run's last 30 lines are
# printed. Exit 0 when every run passed, 1 otherwise, 2 on bad input.
set -uo pipefail
cd "$(dirname "$0")/.."

N=${N:-10}
TESTS=${TESTS:-}
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
  echo "flaky: N must be a whole number of runs >= 1, got '$N'" >&2
  exit 2
fi
if [[ -z "$TESTS" ]]; then
  echo "flaky: name the test targets: TESTS=\"exporter storm sweep::resume\" (make test-targets lists them)" >&2
  exit 2
fi
known=$(make -s --no-print-directory test-targets | cut -d: -f2 | tr ' ' '\n' | sed '/^$/d')
for t in $TESTS; do
  target=${t%%::*}
  if ! grep -qx "$target" <<<"$known"; then
    echo "flaky: '$target' is no test target; the targets are: $(echo $known)" >&2
    exit 2
  fi
done

mkdir -p target/flaky
declare -a rows
failed_any=0
for t in $TESTS; do
  target=${t%%::*}
  filter=""
  [[ "$t" == *::* ]] && filter=${t#*::}
  echo "flaky: building $target" >&2
  # Built once; each run starts the test binary itself (what `cargo test` runs), so a
  # change to the tree during the runs does not rebuild it halfway.
  bin=$(cargo test --workspace --test "$target" --no-run --message-format=json 2>target/flaky/"$target"-build.log |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"] and m["target"]["name"] == sys.argv[1]:
        print(m["executable"] + "\t" + m["manifest_path"].rsplit("/", 1)[0])' "$target" | tail -n 1)
  dir=${bin#*$'\t'}
  bin=${bin%%$'\t'*}
  if [[ -z "$bin" ]]; then
    echo "flaky: $target does not build (target/flaky/$target-build.log)" >&2
    exit 1
  fi
  pass=0
  secs=()
  for i in $(seq 1 "$N"); do
    log=target/flaky/"$target"-"$i".log
    start=$(date +%s.%N)
    # The root tests of the unit tier are #[ignore]d there; --include-ignored runs them too.
    # As cargo runs it: from the package's directory, with CARGO_MANIFEST_DIR set.
    if (cd "$dir" && CARGO_MANIFEST_DIR="$dir" "$bin" --include-ignored --test-threads=1 --nocapture $filter) >"$log" 2>&1; then
      pass=$((pass + 1))
      verdict=pass
    else
      verdict=FAIL
      failed_any=1
      tail -n 30 "$log" | sed "s/^/  [$target $i] /" >&2
    fi
    took=$(echo "$(date +%s.%N) - $start" | bc)
    secs+=("$took")
    printf 'flaky: %s run %d/%d %s in %.0f s\n' "$t" "$i" "$N" "$verdict" "$took" >&2
  done
  mean=$(printf '%s\n' "${secs[@]}" | awk '{s+=$1} END {printf "%.0f", s/NR}')
  rows+=("$(printf '| %s | %d/%d | %s |' "$t" "$pass" "$N" "$mean")")
done
echo
echo "| test | passed | mean s per run |"
echo "|---|---:|---:|"
printf '%s\n' "${rows[@]}"
exit $failed_any
