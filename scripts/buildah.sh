#!/usr/bin/env bash
# buildah as the project runs it, without a Docker daemon or a registry: vfs storage (no
# overlay or fuse needed) kept in .tools/image/ (never committed; `make clean` removes it), and
# chroot isolation (no user namespaces or runc needed). `make image`, scripts/base_image.sh and
# tests/integration/test_image.py all call buildah through this one script.
#   scripts/buildah.sh images            # what is stored
#   scripts/buildah.sh rmi --all         # or `rm -rf .tools/image` to drop the cache
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# one canonical path: .tools may be a symlink, and every worktree must name the same store
store=$(realpath -m "${VOLTPACK_IMAGE_STORE:-$repo/.tools/image}")
export BUILDAH_ISOLATION=chroot
exec buildah --storage-driver vfs --root "$store/storage" --runroot "$store/run" "$@"
