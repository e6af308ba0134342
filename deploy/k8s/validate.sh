#!/usr/bin/env bash
# validate.sh [FILE.yaml...] - offline check of the Kubernetes manifests (default: every
# *.yaml beside this script: bench-job.yaml, daemonset.yaml): strict decoding into the typed
# k8s.io/api objects (unknown fields are errors) plus the checks that sharded `cctl bench`
# runs (Jobs) and `cctl exporter` on every node (DaemonSet) need. No cluster or API server
# is used. Prints OK per file, or the errors and exits 1. Needs Go and the Go module proxy
# (first run).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if (($#)); then
	files=("$@")
else
	files=("$here"/*.yaml)
fi
abs=()
for f in "${files[@]}"; do
	abs+=("$(realpath "$f")")
done
export PATH="$PATH:/usr/local/go/bin"
cd "$here/validate"
go build -o "${TMPDIR:-/tmp}/cctl-k8s-validate.$$" .
trap 'rm -f "${TMPDIR:-/tmp}/cctl-k8s-validate.$$"' EXIT
status=0
for f in "${abs[@]}"; do
	"${TMPDIR:-/tmp}/cctl-k8s-validate.$$" "$f" || status=1
done
exit $status
