#!/usr/bin/env bash
# Builds berth's image from the Dockerfile with buildah: as root, no daemon, no registry.
#
#   bash hack/build-image.sh [IMAGE]        (default localhost/berth:dev; the name is printed last)
#
# The public python base image is not pulled: the base is made from Debian's own packages with
# mmdebstrap (python3, python3-venv, ca-certificates, passwd), imported into buildah's storage and
# given to the Dockerfile as PYTHON_IMAGE. Its name carries a hash of what goes into it (suite,
# packages, apt sources), so it is made once and made again only when one of those changes.
#
# The package index: the machine's own pip configuration (its configuration files and PIP_*
# variables, as `pip config list` reports them, plus a proxy from https_proxy) is written to a
# pip.conf, and the machine's CA bundle is given as the CA pip trusts. Both are build secrets: pip
# reads them while it runs (mounted read-only under /run/secrets) and no layer keeps them. apt is
# used only outside the image, by mmdebstrap, with the machine's apt sources; the base keeps none.
#
# Cache: ${BERTH_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/berth}/image (buildah's storage, base
# images and the layers of earlier builds). Installs buildah and mmdebstrap when missing.
#
# Environment: BERTH_BASE_SUITE (default bookworm), BERTH_BASE_SOURCES (apt sources files, default
# the machine's), BERTH_PYTHON_IMAGE (skip the Debian base and use this image, already in storage).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/image-lib.sh
source hack/image-lib.sh
require_root

image=${1:-localhost/berth:dev}
suite=${BERTH_BASE_SUITE:-bookworm}
packages=(python3 python3-venv ca-certificates passwd)

if ! command -v buildah >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1; then
  bash hack/install-deps.sh image
fi
mkdir -p "$BERTH_IMAGE_CACHE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ------------------------------------------------------------------ the base, from Debian packages
apt_sources() {
  if [[ -n "${BERTH_BASE_SOURCES:-}" ]]; then
    printf '%s\n' $BERTH_BASE_SOURCES
    return
  fi
  [[ -s /etc/apt/sources.list ]] && echo /etc/apt/sources.list
  find /etc/apt/sources.list.d -maxdepth 1 -type f \( -name '*.list' -o -name '*.sources' \) | sort
}
mapfile -t sources < <(apt_sources)
[[ ${#sources[@]} -gt 0 ]] || { image_log "no apt sources found (set BERTH_BASE_SOURCES)"; exit 1; }

# Trimmed from the base: documentation, manual pages, translations; the machine's apt sources.
dpkg_opts=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
           --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*')
hook='rm -f "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*.list "$1"/etc/apt/sources.list.d/*.sources'

build_base() {
  local key name ctr mnt
  key=$( { echo "$suite"; printf '%s\n' "${packages[@]}" "${dpkg_opts[@]}" "$hook";
           grep -hv '^[[:space:]]*#' "${sources[@]}"; } | sha256sum | cut -c1-16)
  name="localhost/berth-base:${suite}-${key}"
  if bh inspect --type image "$name" >/dev/null 2>&1; then
    image_log "base $name (cached)"
    echo "$name"
    return
  fi
  image_log "base $name: mmdebstrap ${suite} with ${packages[*]}"
  ctr=$(bh from --name "berth-base-$key-$$" scratch)
  mnt=$(bh mount "$ctr")
  mmdebstrap --quiet --variant=essential --include="$(IFS=,; echo "${packages[*]}")" "${dpkg_opts[@]}" \
    --customize-hook="$hook" "$suite" "$mnt" "${sources[@]}" >&2
  bh umount "$ctr" >/dev/null
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 --label org.opencontainers.image.description="Debian ${suite}: ${packages[*]}" "$ctr"
  bh commit --quiet --rm "$ctr" "$name" >/dev/null
  echo "$name"
}

if [[ -n "${BERTH_PYTHON_IMAGE:-}" ]]; then
  base=$BERTH_PYTHON_IMAGE
else
  base=$(build_base)
fi

# ------------------------------------------------------------------ the package index, as secrets
# pip's effective configuration on this machine, in one pip.conf (the CA it trusts comes separately).
ca=""
for candidate in "${PIP_CERT:-}" "$(python3 -m pip config get global.cert 2>/dev/null || true)" \
                 "${REQUESTS_CA_BUNDLE:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
  if [[ -n "$candidate" && -f "$candidate" ]]; then ca=$candidate; break; fi
done
python3 - "$work/pip.conf" "${ca:+/run/secrets/pip-ca}" <<'PY'
import configparser, os, subprocess, sys

out, cert = sys.argv[1], sys.argv[2]
conf = configparser.ConfigParser(interpolation=None)
listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
for line in listed.splitlines():
    key, _, value = line.partition("=")
    section, _, name = key.rpartition(".")
    section = "global" if section in ("", ":env:") else section
    value = value.strip().strip("'")
    # Paths of this machine mean nothing inside the build; the CA is given as its own secret.
    if name in ("cert", "client-cert", "find-links", "log", "cache-dir", "src", "target", "prefix", "root"):
        continue
    conf.setdefault(section, {})[name] = value
proxy = os.environ.get("https_proxy") or os.environ.get("HTTPS_PROXY")
if proxy:
    conf.setdefault("global", {})["proxy"] = proxy
if cert:
    conf.setdefault("global", {})["cert"] = cert
with open(out, "w") as f:
    conf.write(f)
PY
secrets=(--secret "id=pip.conf,src=$work/pip.conf")
if [[ -n "$ca" ]]; then
  secrets+=(--secret "id=pip-ca,src=$ca")
else
  : > "$work/no-ca"
  secrets+=(--secret "id=pip-ca,src=$work/no-ca")
fi

# ------------------------------------------------------------------ the image
# The build stage is tagged too (IMAGE-build), so its layers count as in use when the store is
# pruned below; the second bud finds every build-stage step in its cache.
if [[ "${image##*/}" == *:* ]]; then build_stage="${image}-build"; else build_stage="${image}:build"; fi
bud() { bh bud --layers --pull=never --format docker --build-arg "PYTHON_IMAGE=$base" "${secrets[@]}" "$@" . >&2; }
image_log "building $image on $base"
start=$(date +%s)
bud --target build --tag "$build_stage" --file Dockerfile
bud --tag "$image" --file Dockerfile
image_log "built $image in $(( $(date +%s) - start ))s; size $(bh images --format '{{.Size}}' "$image" | head -n 1)"

# ------------------------------------------------------------------ keep the cache bounded
# vfs stores every layer as a full copy, so the layers of earlier builds add up quickly. Remove
# the images no tag leads to any more (steps of older builds) and older berth-base images; keep
# every image whose top layer lies under the base, the build stage or the image just built (the
# cache of the next build).
mapfile -t stale < <(python3 - "$BERTH_IMAGE_CACHE/storage" "$base" "$build_stage" "$image" <<'PY'
import json, sys
from pathlib import Path

store, *keep = sys.argv[1:]
images = json.loads((Path(store) / "vfs-images" / "images.json").read_text())
parents = {l["id"]: l.get("parent") for l in json.loads((Path(store) / "vfs-layers" / "layers.json").read_text())}
kept_layers = set()
for img in images:
    if set(img.get("names") or []) & set(keep):
        layer = img.get("layer")
        while layer and layer not in kept_layers:
            kept_layers.add(layer)
            layer = parents.get(layer)
for img in images:
    names = img.get("names") or []
    old_base = names and all(n.startswith("localhost/berth-base:") and n not in keep for n in names)
    if (not names and img.get("layer") not in kept_layers) or old_base:
        print(img["id"])
PY
)
if [[ ${#stale[@]} -gt 0 ]]; then
  image_log "pruning ${#stale[@]} unused images from the cache"
  for id in "${stale[@]}"; do bh rmi "$id" >/dev/null 2>&1 || true; done
fi
echo "$image"
