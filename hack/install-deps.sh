#!/usr/bin/env bash
# Install the system packages the e2e control plane needs and that Go cannot build here:
# etcd (Debian's etcd-server; its etcd 3.4 serves a current kube-apiserver).
#
#   bash hack/install-deps.sh
#
# Installs only what is missing. Needs root (or sudo) and the Debian package mirror.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else log "not root and no sudo"; exit 1; fi
fi

if command -v etcd >/dev/null 2>&1; then
  log "etcd present: $(command -v etcd)"
  exit 0
fi

log "installing etcd-server"
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
${SUDO} apt-get install -y -qq --no-install-recommends etcd-server >&2
command -v etcd >/dev/null 2>&1 || { log "etcd still not found after install"; exit 1; }
log "etcd installed: $(command -v etcd)"
