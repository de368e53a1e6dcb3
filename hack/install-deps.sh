#!/usr/bin/env bash
# Install the system packages the tests need and that Go or pip cannot bring, from Debian's
# package mirror with apt:
#   etcd   the e2e control plane's etcd (Debian's etcd-server; its etcd 3.4 serves a current
#          kube-apiserver)
#   image  buildah and mmdebstrap, which build the container image without a daemon
#          (hack/build-image.sh) and run it (hack/run-image.sh)
#   browser  chromium and chromium-driver, for the page's browser tests (tests/browser)
#
#   bash hack/install-deps.sh [etcd] [image] [browser]     (no argument: etcd)
#
# Installs only what is missing. Needs root (or sudo) and the Debian package mirror.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else log "not root and no sudo"; exit 1; fi
fi

groups=("$@")
[[ ${#groups[@]} -gt 0 ]] || groups=(etcd)

# command -> Debian package, for each group
missing=()
for group in "${groups[@]}"; do
  case "$group" in
    etcd)  wanted=("etcd:etcd-server") ;;
    image) wanted=("buildah:buildah" "mmdebstrap:mmdebstrap") ;;
    browser) wanted=("chromium:chromium" "chromedriver:chromium-driver") ;;
    *) log "unknown group '$group' (etcd, image, browser)"; exit 2 ;;
  esac
  for pair in "${wanted[@]}"; do
    cmd=${pair%%:*}
    if command -v "$cmd" >/dev/null 2>&1; then
      log "$cmd present: $(command -v "$cmd")"
    else
      missing+=("${pair#*:}")
    fi
  done
done
[[ ${#missing[@]} -gt 0 ]] || exit 0

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Do not start the packaged etcd service: the tests start their own etcd.
policy_rc_created=0
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | ${SUDO} tee /usr/sbin/policy-rc.d >/dev/null
  ${SUDO} chmod +x /usr/sbin/policy-rc.d
  policy_rc_created=1
fi
cleanup() { if [[ "${policy_rc_created}" == "1" ]]; then ${SUDO} rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT

${SUDO} apt-get update -qq
${SUDO} apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
for group in "${groups[@]}"; do
  case "$group" in
    etcd)  cmds=(etcd) ;;
    image) cmds=(buildah mmdebstrap) ;;
    browser) cmds=(chromium chromedriver) ;;
  esac
  for cmd in "${cmds[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || { log "$cmd still not found after install"; exit 1; }
    log "$cmd installed: $(command -v "$cmd")"
  done
done
