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

# reproducible: the committed go.mod/go.sum decide every dependency; no toolchain download
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
control_plane=$(cd ../kubernetes && go list -m -f '{{.Version}}' k8s.io/kubernetes)
if [ "$k8s_version" != "$control_plane" ]; then
  echo "go.mod pins k8s.io/kubernetes $k8s_version, ../kubernetes/go.mod $control_plane: e2e.test" \
    "must test the control plane's release (move both together)" >&2
  exit 1
fi
# the release's own time (from the module proxy), not the wall clock, so builds are repeatable
build_date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
major=${k8s_version#v}
major=${major%%.*}
minor=${k8s_version#v*.}
minor=${minor%%.*}

# the version e2e.test reports (and compares with the server's), as in a release build
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

echo "building e2e.test $k8s_version into $out"
go test -c -trimpath -ldflags "$ldflags" -o "$out/e2e.test.tmp" k8s.io/kubernetes/test/e2e
mv "$out/e2e.test.tmp" "$out/e2e.test"
"$out/e2e.test" --version
