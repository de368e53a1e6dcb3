#!/usr/bin/env bash
# Build kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and helm from the Go
# module proxy and cache
# them outside the repository, keyed by version; install etcd (hack/install-deps.sh) if missing.
#
#   bash hack/build-k8s.sh          # prints the bin dir as its last line on stdout
#
# The versions are pinned by hack/k8s-build/go.mod (k8s.io/kubernetes + replace directives
# for every k8s.io staging module) and hack/helm-build/go.mod (helm.sh/helm/v4); go.sum
# files make the builds reproducible. Only the first run pays for the build: the binaries
# are kept in
#
#   ${BERTH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth}/k8s-<version>/bin/
#
# together with a stamp per group of binaries built together (a hash of the Go version, the
# ldflags and, for the Kubernetes binaries, their main files and the module versions they are
# built from, so that adding a command to hack/k8s-build, and the go.mod lines it needs, does
# not rebuild the others; for helm, of its module's go.mod, go.sum and main files); a changed
# stamp or a missing binary triggers a rebuild of that group.
#
# Environment:
#   BERTH_CACHE_DIR   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/berth)
#   BERTH_BUILD_FORCE=1  rebuild even if the cached binaries are up to date
#   BERTH_SKIP_DEPS=1 do not run hack/install-deps.sh (which installs etcd if it is missing)
#   GOFLAGS, GOCACHE, GOMODCACHE, GOPROXY are honoured as usual.
#
# All logs go to stderr; stdout carries only the bin dir.
set -euo pipefail

# Everything is in main(), so that bash parses the whole script before running any of it
# (editing it while a build runs then cannot break that build).
main() {
  log() { printf 'build-k8s: %s\n' "$*" >&2; }

  HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  K8S_MOD_DIR="${HACK_DIR}/k8s-build"
  HELM_MOD_DIR="${HACK_DIR}/helm-build"

  command -v go >/dev/null 2>&1 || { log "go is not installed (need Go >= 1.26)"; exit 1; }

  # required_version <go.mod> <module>: the version a go.mod requires (no network, no module cache).
  required_version() {
    awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$1"
  }

  # The pinned versions come from the go.mod files (single source of truth).
  K8S_VERSION="$(required_version "${K8S_MOD_DIR}/go.mod" k8s.io/kubernetes)"
  HELM_VERSION="$(required_version "${HELM_MOD_DIR}/go.mod" helm.sh/helm/v4)"
  [[ -n "${K8S_VERSION}" && -n "${HELM_VERSION}" ]] || { log "cannot read pinned versions from go.mod"; exit 1; }

  CACHE_ROOT="${BERTH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth}"
  OUT_DIR="${CACHE_ROOT}/k8s-${K8S_VERSION}"
  BIN_DIR="${OUT_DIR}/bin"
  mkdir -p "${BIN_DIR}"

  GO_VERSION="$(go env GOVERSION)"

  # stamp <module dir> [binaries...]: a hash of the Go version and, without binaries, of the
  # module's sources; with binaries, of their main files and of the modules (path, version,
  # replacement) their packages come from, which go.sum pins (the ldflags are added by
  # build_module).
  stamp() {
    local dir="$1"
    shift
    {
      echo "${GO_VERSION} $(go env GOOS)/$(go env GOARCH)"
      if [[ $# -eq 0 ]]; then
        (cd "${dir}" && find . -type f \( -name 'go.mod' -o -name 'go.sum' -o -name '*.go' \) | LC_ALL=C sort | xargs sha256sum)
      else
        local pkgs=() b
        for b in "$@"; do pkgs+=("./cmd/${b}"); done
        (cd "${dir}" && find "${pkgs[@]}" -type f -name '*.go' | LC_ALL=C sort | xargs sha256sum)
        (cd "${dir}" && go list -mod=readonly -deps \
          -f '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}' \
          "${pkgs[@]}" | LC_ALL=C sort -u)
      fi
    } | sha256sum | cut -d' ' -f1
  }

  # up_to_date <stamp name> <stamp> <binaries...>
  up_to_date() {
    local name="$1" want="$2"
    shift 2
    [[ "${BERTH_BUILD_FORCE:-0}" == "1" ]] && return 1
    [[ -f "${OUT_DIR}/${name}.stamp" && "$(cat "${OUT_DIR}/${name}.stamp")" == "${want}" ]] || return 1
    local b
    for b in "$@"; do
      [[ -x "${BIN_DIR}/${b}" ]] || return 1
    done
  }

  # want_stamp <module dir> <ldflags> [binaries...]
  want_stamp() {
    local dir="$1" ldflags="$2"
    shift 2
    printf '%s-%s\n' "$(stamp "${dir}" "$@")" "$(printf '%s' "${ldflags}" | sha256sum | cut -c1-16)"
  }

  # build_module <module dir> <stamp name> <ldflags> <per-binary stamp: 0|1> <binaries...>: builds
  # ./cmd/<binary> for each binary into a temp dir in one `go build` (the packages share most
  # compile work), then moves them into place. Call with the lock held.
  build_module() {
    local dir="$1" name="$2" ldflags="$3" per_binary="$4"
    shift 4
    local want
    if [[ "${per_binary}" == "1" ]]; then
      want="$(want_stamp "${dir}" "${ldflags}" "$@")"
    else
      want="$(want_stamp "${dir}" "${ldflags}")"
    fi
    if up_to_date "${name}" "${want}" "$@"; then
      log "${name}: cached in ${BIN_DIR}"
      return 0
    fi
    local tmp pkgs=() b start
    tmp="$(mktemp -d "${OUT_DIR}/.build.XXXXXX")"
    for b in "$@"; do pkgs+=("./cmd/${b}"); done
    log "${name}: building $* (this takes a while on a cold Go cache)"
    start=$(date +%s)
    # 9>&-: the compiler must not inherit the lock, or an orphaned build would keep holding it.
    # The build date is looked up only now (it may need the module proxy); the stamp has the
    # placeholder.
    ldflags="${ldflags//@BUILD_DATE@/$(k8s_build_date)}"
    (cd "${dir}" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "${ldflags}" -o "${tmp}/" "${pkgs[@]}") 9>&-
    for b in "$@"; do mv -f "${tmp}/${b}" "${BIN_DIR}/${b}"; done
    rmdir "${tmp}"
    echo "${want}" >"${OUT_DIR}/${name}.stamp"
    log "${name}: built in $(( $(date +%s) - start ))s"
  }

  # Version stamping, as Kubernetes' hack/lib/version.sh does for release builds.
  # The build date is the release's publication time on the module proxy.
  k8s_build_date() {
    local d
    d="$(cd "${K8S_MOD_DIR}" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes 2>/dev/null || true)"
    echo "${d:-1970-01-01T00:00:00Z}"
  }
  k8s_major="${K8S_VERSION#v}"; k8s_major="${k8s_major%%.*}"
  k8s_minor="${K8S_VERSION#v*.}"; k8s_minor="${k8s_minor%%.*}"
  k8s_ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X ${pkg}.gitVersion=${K8S_VERSION}"
    k8s_ldflags+=" -X ${pkg}.gitMajor=${k8s_major}"
    k8s_ldflags+=" -X ${pkg}.gitMinor=${k8s_minor}"
    k8s_ldflags+=" -X ${pkg}.gitTreeState=clean"
    k8s_ldflags+=" -X ${pkg}.buildDate=@BUILD_DATE@"
  done
  K8S_BINARIES=(kube-apiserver kube-scheduler kubectl)
  helm_ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}"
  helm_ldflags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

  # etcd comes from Debian, not from Go: install it too if it is missing (needs root or sudo).
  if [[ "${BERTH_SKIP_DEPS:-0}" != "1" ]] && ! command -v etcd >/dev/null 2>&1; then
    bash "${HACK_DIR}/install-deps.sh" >&2 || log "WARNING: could not install etcd (run hack/install-deps.sh as root)"
  fi

  log "Kubernetes ${K8S_VERSION}, helm ${HELM_VERSION}, ${GO_VERSION}; cache ${OUT_DIR}"
  # Fast path, without the lock: everything is cached already.
  if up_to_date k8s "$(want_stamp "${K8S_MOD_DIR}" "${k8s_ldflags}" "${K8S_BINARIES[@]}")" "${K8S_BINARIES[@]}" &&
    up_to_date kcm "$(want_stamp "${K8S_MOD_DIR}" "${k8s_ldflags}" kube-controller-manager)" kube-controller-manager &&
    up_to_date helm "$(want_stamp "${HELM_MOD_DIR}" "${helm_ldflags}")" helm; then
    log "all binaries cached in ${BIN_DIR}"
    echo "${BIN_DIR}"
    return 0
  fi

  # Several checkouts may build at once: serialise on a lock in the cache dir. Once it is
  # held, temp dirs of earlier builds are leftovers of interrupted runs.
  exec 9>"${OUT_DIR}/.lock"
  if command -v flock >/dev/null 2>&1; then
    log "taking the build lock ${OUT_DIR}/.lock (waits while another build runs)"
    flock 9
  fi
  rm -rf "${OUT_DIR}"/.build.*
  build_module "${K8S_MOD_DIR}" k8s "${k8s_ldflags}" 1 "${K8S_BINARIES[@]}"
  # its own group: adding it did not rebuild the others (see stamp)
  build_module "${K8S_MOD_DIR}" kcm "${k8s_ldflags}" 1 kube-controller-manager
  build_module "${HELM_MOD_DIR}" helm "${helm_ldflags}" 0 helm
  exec 9>&-

  echo "${BIN_DIR}"
}

main "$@"; exit $?  # on one line: bash has read it whole before main runs
