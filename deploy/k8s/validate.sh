#!/usr/bin/env bash
# validate.sh [FILE.yaml] - offline check of the Kubernetes manifest (default: bench-job.yaml
# beside this script): strict decoding into the typed k8s.io/api objects (unknown fields are
# errors) plus the checks that sharded `cctl bench` runs need. No cluster or API server is
# used. Prints OK, or the errors and exits 1. Needs Go and the Go module proxy (first run).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
file="$(realpath "${1:-$here/bench-job.yaml}")"
export PATH="$PATH:/usr/local/go/bin"
cd "$here/validate"
exec go run . "$file"
