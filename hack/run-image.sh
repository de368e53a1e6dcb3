#!/usr/bin/env bash
# Runs berth's image as the Helm chart runs it, with no container engine: as the image's user
# (65532:65532), on a read-only root filesystem, with a writable tmpfs on /tmp, sharing the
# machine's network (so a server in it answers on 127.0.0.1).
#
#   bash hack/run-image.sh [--input DIR] [--entrypoint PATH] IMAGE [ARG...]
#   bash hack/run-image.sh [--input DIR] [--entrypoint PATH] --container NAME [ARG...]   (NAME last)
#
#   --container NAME   run in this existing working container (`buildah from IMAGE`, made with
#                      hack/image-lib.sh's storage) instead of a throwaway one: with the vfs
#                      driver each new container copies the whole image, which takes a while
#   --input DIR        DIR is visible, read-only, at /tmp/input (a snapshot to serve, for example)
#   --entrypoint PATH  run PATH instead of the image's entrypoint (ARGs follow it)
#
# How the read-only root is enforced: buildah makes a throwaway working container of IMAGE and
# mounts its root filesystem; in a new mount and PID namespace that tree is bind-mounted and
# re-mounted read-only (MS_RDONLY on the bind mount: the kernel refuses every write under it with
# EROFS, root's included), then fresh tmpfs mounts go on /tmp and /dev (with null, zero, full,
# random and urandom bound from the machine) and a new procfs on /proc. chroot --userspec drops
# to the image's user before the entrypoint runs, with the image's environment and working
# directory. The working container is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/image-lib.sh
source hack/image-lib.sh
require_root

input=""
entrypoint=""
container=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --input) input=$(realpath "$2"); shift 2 ;;
    --entrypoint) entrypoint=$2; shift 2 ;;
    --container) container=$2; shift 2; break ;;   # the last option: ARGs follow
    --) shift; break ;;
    -*) image_log "unknown option $1"; exit 2 ;;
    *) break ;;
  esac
done
if [[ -n "$container" ]]; then
  kind=container; image=$container
else
  [[ $# -ge 1 ]] || { image_log "usage: run-image.sh [--input DIR] [--entrypoint PATH] IMAGE|--container NAME [ARG...]"; exit 2; }
  kind=image; image=$1; shift
fi

config() { bh inspect --type "$kind" --format "$1" "$image"; }
user=$(config '{{.OCIv1.Config.User}}')
workdir=$(config '{{.OCIv1.Config.WorkingDir}}')
mapfile -t env_vars < <(config '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' | sed '/^$/d')
if [[ -n "$entrypoint" ]]; then
  command=("$entrypoint")
else
  mapfile -t command < <(config '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' | sed '/^$/d')
fi
[[ "$user" =~ ^[0-9]+(:[0-9]+)?$ ]] || { image_log "image user '$user' is not numeric uid:gid"; exit 1; }
[[ "$user" == *:* ]] || user="$user:$user"

if [[ -n "$container" ]]; then
  ctr=$container
  cleanup() { :; }
else
  ctr=$(bh from --pull=never --quiet "$image")
  cleanup() { bh rm "$ctr" >/dev/null 2>&1 || true; }
fi
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
rootfs=$(bh mount "$ctr")

# The namespace's side: runs as root in a new mount and PID namespace, ends by exec'ing the
# entrypoint as the image's user. Its own mounts vanish with the namespace.
unshare --mount --propagation private --pid --fork --kill-child -- bash -euo pipefail -c '
  rootfs=$1 input=$2 user=$3 workdir=$4; shift 4
  root=$(mktemp -d)
  mount --bind "$rootfs" "$root"
  mount -o remount,bind,ro "$root"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
  mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
  mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
  for dev in null zero full random urandom; do
    touch "$root/dev/$dev"
    mount --bind "/dev/$dev" "$root/dev/$dev"
  done
  if [[ -n "$input" ]]; then
    mkdir "$root/tmp/input"
    mount --bind "$input" "$root/tmp/input"
    mount -o remount,bind,ro "$root/tmp/input"
  fi
  n_env=$1; shift
  envs=("${@:1:$n_env}"); shift "$n_env"
  exec chroot --userspec="$user" --groups="${user#*:}" "$root" \
    /usr/bin/env -i --chdir="${workdir:-/}" "${envs[@]}" "$@"
' run-image "$rootfs" "$input" "$user" "$workdir" "${#env_vars[@]}" "${env_vars[@]}" "${command[@]}" "$@"
