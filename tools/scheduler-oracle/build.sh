#!/usr/bin/env bash
# Builds scheduler-oracle (kube-scheduler's own Filter plugins behind a JSON-lines protocol, for
# the tests: tests/scheduler_oracle.py) into OUT_DIR, from the Go module proxy, against the same
# k8s.io/kubernetes version as tools/kubernetes/go.mod (checked: the oracle must judge bindings
# as the kube-scheduler `make k8s` builds would).
# Usage: tools/scheduler-oracle/build.sh OUT_DIR   (`make oracle` calls it)
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")"
command -v go >/dev/null || { echo "go is needed to build scheduler-oracle (Go >= 1.24)" >&2; exit 1; }

source ../go-build-common.sh

require_control_plane_release scheduler-oracle
k8s_version=$(kubernetes_version)

echo "building scheduler-oracle against k8s.io/kubernetes $k8s_version into $out"
go build -trimpath -ldflags "-s -w" -o "$out/scheduler-oracle.tmp" .
mv "$out/scheduler-oracle.tmp" "$out/scheduler-oracle"
echo "scheduler-oracle: kube-scheduler plugins $("$out/scheduler-oracle" --version)"
