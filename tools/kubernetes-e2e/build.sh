#!/usr/bin/env bash
# Builds Kubernetes' end-to-end test binary, e2e.test (k8s.io/kubernetes/test/e2e, compiled with
# `go test -c`), at the release pinned in go.mod beside this script, from the Go module proxy,
# into OUT_DIR. tests/k8s_e2e.py runs its [sig-scheduling] tests against the control plane that
# `make k8s` builds (tests/conformance/test_sig_scheduling.py, docs/k8s-conformance.md).
# About 5 minutes on 2 cores from empty Go caches (less when `make k8s` has filled the build cache
# with the packages both share); a binary of about 180 MB.
# Usage: tools/kubernetes-e2e/build.sh OUT_DIR   (`make e2e-test` calls it and keeps a stamp file)
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")"
command -v go >/dev/null || { echo "go is needed to build e2e.test (Go >= 1.24)" >&2; exit 1; }

source ../go-build-common.sh

require_control_plane_release e2e.test
k8s_version=$(kubernetes_version)
# the version e2e.test reports (and compares with the server's), as in a release build
ldflags=$(kubernetes_release_ldflags)

echo "building e2e.test $k8s_version into $out"
go test -c -trimpath -ldflags "$ldflags" -o "$out/e2e.test.tmp" k8s.io/kubernetes/test/e2e
mv "$out/e2e.test.tmp" "$out/e2e.test"
"$out/e2e.test" --version
