#!/usr/bin/env bash
# Builds the pinned release tools the chart and monitoring tests need, from the Go module proxy
# (this project's machines have no download sites and no Docker), and caches them outside the
# clone, keyed by version, beside the envtest binaries (see hack/envtest.sh):
#
#   helm      helm.sh/helm/v3/cmd/helm                      (helm lint, helm template)
#   promtool  github.com/prometheus/prometheus/cmd/promtool (promtool check rules, test rules)
#
# Usage: hack/tools.sh [TOOL...]         build the missing ones (default: all), print each binary's path
#        hack/tools.sh --check [TOOL...] print each binary's path; exit 1 when one is missing (builds nothing)
#
# A cold build on a 2-core machine takes about 2 minutes for helm and 4-5 minutes for promtool
# (built without the service-discovery plugins, see below); a warm call prints the paths at once.
# Override a version with HELM_VERSION=... or PROMETHEUS_VERSION=... (Go module versions).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
# Prometheus publishes its Go module as v0.MMM.P for the release 3.MM.P (v0.316.0 is Prometheus 3.16.0).
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE_ROOT="${SWITCHYARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
PLATFORM="$(go env GOOS)-$(go env GOARCH)"

log() { echo "tools: $*" >&2; }

# path TOOL: where the binary lives (whether or not it is built yet).
path() {
  case "$1" in
    helm) echo "${CACHE_ROOT}/tools/helm-${HELM_VERSION}-${PLATFORM}/helm" ;;
    promtool) echo "${CACHE_ROOT}/tools/promtool-${PROMETHEUS_VERSION}-${PLATFORM}/promtool" ;;
    *) log "unknown tool '$1' (known: helm, promtool)"; exit 2 ;;
  esac
}

# build TOOL: go install the pinned package into a scratch GOBIN, then move it into place, so an
# interrupted build never leaves a half-written binary at the cached path.
build() {
  local tool="$1" dest pkg ldflags tags=""
  dest="$(path "${tool}")"
  case "${tool}" in
    helm)
      pkg="helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
      # As helm's own Makefile does: stamp the version, and the Kubernetes version that `helm
      # template` and `helm lint` assume (1.<minor of the client-go helm is built with>; without it
      # they assume 1.20 and refuse charts that need a newer cluster).
      local gomod minor
      gomod="$(cd /tmp && GOWORK=off GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
      minor="$(awk '$1 == "k8s.io/client-go" {print $2}' "${gomod}" | cut -d. -f2)"
      [[ -n "${minor}" ]] || { log "cannot find the client-go version in ${gomod}"; return 1; }
      ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
      for pkgvar in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
        ldflags+=" -X ${pkgvar}.k8sVersionMajor=1 -X ${pkgvar}.k8sVersionMinor=${minor}"
      done
      ;;
    promtool)
      pkg="github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}"
      # Stamp the release (v0.316.0 -> 3.16.0) as Prometheus' own build does, for `promtool --version`.
      local release minor patch
      minor="$(echo "${PROMETHEUS_VERSION#v0.}" | cut -d. -f1)"
      patch="$(echo "${PROMETHEUS_VERSION}" | cut -d. -f3)"
      release="$(( minor / 100 )).$(( minor % 100 )).${patch}"
      ldflags="-s -w -X github.com/prometheus/common/version.Version=${release}"
      # Prometheus' plugins/ registers each service discovery (AWS, Azure, GCE, OCI, ...) under
      # `//go:build !remove_all_sd || enable_<name>_sd`; remove_all_sd keeps only file and http
      # (plugins/minimum.go). `promtool check rules` and `test rules` discover no targets, and
      # skipping those cloud SDKs (about 80 MB of Go source) cuts most of the cold build.
      tags="remove_all_sd"
      ;;
  esac
  log "building ${pkg} (minutes on a cold cache)"
  mkdir -p "${CACHE_ROOT}/tools"
  local work start
  work="$(mktemp -d "${CACHE_ROOT}/tools/build.XXXXXX")"
  start=$(date +%s)
  # Outside any module (cd to the scratch dir, GOWORK off): `go install pkg@version` resolves the
  # tool's own go.mod exactly as its release pinned it. Neither module has replace directives.
  (
    cd "${work}"
    GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="${work}/bin" \
      go install -trimpath -tags="${tags}" -ldflags="${ldflags}" "${pkg}" >&2
  ) || { rm -rf "${work}"; log "building ${pkg} failed"; return 1; }
  mkdir -p "$(dirname "${dest}")"
  mv "${work}/bin/${tool}" "${dest}"
  rm -rf "${work}"
  log "${tool} ready in $(( $(date +%s) - start ))s: ${dest}"
}

check=false
if [[ "${1:-}" == "--check" ]]; then
  check=true
  shift
fi
tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(helm promtool)

status=0
for t in "${tools[@]}"; do
  p="$(path "${t}")"
  if [[ ! -x "${p}" ]]; then
    if ${check}; then
      status=1
      continue
    fi
    build "${t}"
  fi
  echo "${p}"
done
exit "${status}"
