# Sourced by the Go build scripts under tools/ (each from its own folder, beside its go.mod): the
# settings that make a build reproducible, and the checks and version stamps the Kubernetes
# builds share.

# reproducible: the committed go.mod/go.sum decide every dependency; no toolchain download
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

# The k8s.io/kubernetes version this folder's go.mod pins.
kubernetes_version() {
  go list -m -f '{{.Version}}' k8s.io/kubernetes
}

# Fails unless this folder's go.mod pins the k8s.io/kubernetes release of the control plane
# (../kubernetes/go.mod): what it builds must judge or test that release. $1 names the binary.
require_control_plane_release() {
  local ours theirs
  ours=$(kubernetes_version)
  theirs=$(cd ../kubernetes && kubernetes_version)
  if [ "$ours" != "$theirs" ]; then
    echo "$(basename "$PWD")/go.mod pins k8s.io/kubernetes $ours, tools/kubernetes/go.mod $theirs:" \
      "$1 must be built from the control plane's release (move both together, staging replaces too)" >&2
    exit 1
  fi
}

# The -ldflags of a release build of this folder's k8s.io/kubernetes: the version `kubectl
# version` and /version show (as hack/lib/version.sh stamps it), dated by the release's own time
# from the module proxy, not the wall clock, so builds are repeatable.
kubernetes_release_ldflags() {
  local version build_date major minor ldflags pkg
  version=$(kubernetes_version)
  build_date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
  major=${version#v}
  major=${major%%.*}
  minor=${version#v*.}
  minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  echo "$ldflags"
}
