# Sourced by hack/build-image.sh and hack/run-image.sh: where buildah keeps its images, and how
# it is called. buildah runs as root, without a daemon: chroot isolation (no container runtime
# needed) and the vfs storage driver (no overlay or fuse mounts needed). Its storage lives
# outside the repository, so a second build reuses the base image and every unchanged layer.

BERTH_IMAGE_CACHE=${BERTH_IMAGE_CACHE:-${BERTH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth}/image}
export BUILDAH_ISOLATION=chroot
export STORAGE_DRIVER=vfs

bh() {
  buildah --root "$BERTH_IMAGE_CACHE/storage" --runroot "$BERTH_IMAGE_CACHE/runroot" \
    --storage-driver vfs "$@"
}

image_log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

require_root() {
  if [[ "$(id -u)" != "0" ]]; then
    image_log "needs root (buildah with chroot isolation and vfs storage, mmdebstrap, mount namespaces)"
    exit 1
  fi
}
