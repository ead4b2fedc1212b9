#!/usr/bin/env bash
# `make image`: the voltpack image, built by buildah without a Docker daemon (scripts/buildah.sh:
# vfs storage in .tools/image/, chroot isolation, which shares the host's network, so pip in the
# build reaches PyPI as the host does). The base is the Debian image of scripts/base_image.sh,
# or $BASE when set (BASE=python:3.12-slim-bookworm where a registry is reachable).
# Skipped when the image exists and nothing it is built from changed: the Dockerfile, this
# script, the base and every file .dockerignore lets into the build (pyproject.toml, the runtime
# lock, voltpack/, the data files), hashed into .tools/image/voltpack-<version>.inputs.
# Prints the image's size (`buildah images`) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
buildah=scripts/buildah.sh

version=$(awk -F'"' '/^version = "/ {print $2; exit}' pyproject.toml)
name=localhost/voltpack:$version
store=$(realpath -m "${VOLTPACK_IMAGE_STORE:-.tools/image}")
stamp=$store/voltpack-$version.inputs
# one build at a time per store (parallel test workers may all ask for the image)
mkdir -p "$store" && exec 9>"$store/.lock" && flock 9
base=${BASE:-$(scripts/base_image.sh)}

# the build context is what .dockerignore lets in (its `!path` lines): hash exactly that
mapfile -t context < <(sed -n 's/^!\(.*\)/\1/p' .dockerignore | sed 's:/$::')
inputs=$( {
  echo "base $base"
  sha256sum Dockerfile .dockerignore "$0"
  find "${context[@]}" -type f -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
} | sha256sum | cut -d' ' -f1)

if [ "$(cat "$stamp" 2>/dev/null)" = "$inputs" ] && "$buildah" images --quiet "$name" >/dev/null 2>&1; then
  echo "image $name is up to date (inputs unchanged, $stamp)"
else
  rm -f "$stamp"
  secret=()
  # behind a TLS-intercepting proxy the host's pip trusts its CA through PIP_CERT: so does the
  # build's pip (a build secret: mounted for the pip steps only, never stored in the image)
  if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then secret=(--secret "id=pip_cert,src=$PIP_CERT"); fi
  echo "building $name from $base"
  "$buildah" bud "${secret[@]}" --build-arg BASE="$base" --tag "$name" .
  # the image this tag named before is dangling now; each costs its full size with vfs
  "$buildah" rmi --prune >/dev/null 2>&1 || true
  echo "$inputs" > "$stamp"
fi
"$buildah" images "$name"
