#!/usr/bin/env bash
# The Debian base image for `make image` on a machine without a registry: Debian's own packages
# (debootstrap from a Debian mirror) committed as an image by buildah, in the project's image
# store (.tools/image/, see scripts/buildah.sh). Prints the image's name on its last line:
#   BASE=$(scripts/base_image.sh)     # e.g. localhost/voltpack-base:bookworm-3f1c2a9d0b7e
# The tag is a hash of this script and its inputs (suite, mirror, packages): when an image with
# that tag exists it is reused (about a second); otherwise it is built (about 2 minutes).
# Inputs, from the environment:
#   DEBIAN_MIRROR  default http://deb.debian.org/debian (the mirror apt uses on the CI machine)
#   DEBIAN_SUITE   default bookworm (Python 3.11, which voltpack supports)
set -euo pipefail
cd "$(dirname "$0")/.."
buildah=scripts/buildah.sh

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}
# python3-venv brings ensurepip (the Dockerfile makes a venv; Debian's python3 has no pip);
# libgomp1 is the OpenMP runtime LightGBM's wheel loads; ca-certificates as in python:*-slim
packages=python3,python3-venv,libgomp1,ca-certificates

hash=$( { cat "$0"; echo "$suite $mirror $packages"; } | sha256sum | cut -c1-12)
name=localhost/voltpack-base:$suite-$hash

if "$buildah" images --quiet "$name" >/dev/null 2>&1; then
  echo "base image $name is built already (same script and inputs)" >&2
  echo "$name"
  exit 0
fi

command -v debootstrap >/dev/null || { echo "debootstrap is needed: apt-get install debootstrap" >&2; exit 1; }
echo "building $name: debootstrap $suite from $mirror (about 2 minutes)" >&2
ctr=$("$buildah" from scratch)
root=$("$buildah" mount "$ctr")
cleanup() {
  # debootstrap mounts /proc and /sys inside the root while it runs; never leave them behind
  umount -R "$root/proc" "$root/sys" 2>/dev/null || true
  "$buildah" rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT

debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >&2
# what an image need not carry: downloaded .debs, apt's package lists, logs, translations,
# documentation (the copyright files stay) and man pages; dpkg keeps them out of later installs
# too, as in Debian's -slim images (python:*-slim's base)
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
  "$root"/var/log/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
cat > "$root/etc/dpkg/dpkg.cfg.d/voltpack-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG

"$buildah" umount "$ctr" >/dev/null
# an image from scratch has no environment: PATH as in Debian's images (the Dockerfile extends it)
"$buildah" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --cmd /bin/bash \
  --label org.opencontainers.image.description="Debian $suite ($packages) from $mirror" \
  --label voltpack.base.inputs="$hash" "$ctr"
"$buildah" commit --quiet --rm "$ctr" "$name" >/dev/null
trap - EXIT
# the bases of earlier inputs (images built on them keep their layers)
"$buildah" images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/voltpack-base:' | grep -vxF "$name" \
  | xargs -r "$buildah" rmi >/dev/null 2>&1 || true
echo "$name"
