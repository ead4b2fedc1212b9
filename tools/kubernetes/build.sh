#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager and etcd at the versions pinned in
# go.mod beside this script, and kwok at $KWOK_VERSION, all from the Go module proxy, into OUT_DIR.
# kube-controller-manager runs the chart's Deployments and DaemonSet on kwok nodes (the chart-install
# e2e, tests/integration/test_chart_install.py).
# Usage: tools/kubernetes/build.sh OUT_DIR   (`make k8s` calls it and keeps a stamp file)
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
kwok_version=${KWOK_VERSION:?set KWOK_VERSION, e.g. v0.8.0}
cd "$(dirname "$0")"
command -v go >/dev/null || { echo "go is needed to build the Kubernetes binaries (Go >= 1.24)" >&2; exit 1; }

source ../go-build-common.sh

k8s_version=$(kubernetes_version)
etcd_version=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
ldflags=$(kubernetes_release_ldflags)

echo "building kube-apiserver, kube-scheduler and kube-controller-manager $k8s_version, etcd $etcd_version, kwok $kwok_version into $out"
go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags "$ldflags" -o "$out/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
go build -trimpath -ldflags "$ldflags" -o "$out/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
# kwok's own go.mod/go.sum pin its dependencies; it installs as published
GOFLAGS=-buildvcs=false GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"

"$out/kube-apiserver" --version
"$out/kube-scheduler" --version
"$out/kube-controller-manager" --version
"$out/etcd" --version | sed -n 1p  # sed reads to the end: head -1 may close the pipe early (SIGPIPE, 141 under pipefail)
"$out/kwok" --version
