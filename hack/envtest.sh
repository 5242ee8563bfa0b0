#!/usr/bin/env bash
# Builds the control-plane binaries envtest needs (kube-apiserver, etcd, kubectl) from the Go
# module proxy, because this project's machines have no Docker and no download sites. The binaries
# are cached outside the clone, keyed by version, so a fresh clone (CI) reuses them.
#
# Usage: hack/envtest.sh            build if missing, print the directory for KUBEBUILDER_ASSETS
#        hack/envtest.sh --check    exit 1 when the binaries are missing (builds nothing)
#
# A cold build takes about 5-7 minutes on a shared 2-core machine (twice that when it is busy); a
# warm one prints the path at once.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
CACHE_ROOT="${SWITCHYARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
ASSETS="${CACHE_ROOT}/envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-$(go env GOOS)-$(go env GOARCH)"

have_all() {
  [[ -x "${ASSETS}/kube-apiserver" && -x "${ASSETS}/etcd" && -x "${ASSETS}/kubectl" ]]
}

if [[ "${1:-}" == "--check" ]]; then
  have_all && { echo "${ASSETS}"; exit 0; }
  exit 1
fi

if have_all; then
  echo "${ASSETS}"
  exit 0
fi

log() { echo "envtest: $*" >&2; }
# shellcheck source=hack/k8smodule.sh
source "$(dirname "$0")/k8smodule.sh"
t0=${SECONDS}
mkdir -p "${ASSETS}"
# The scratch directory sits beside ASSETS (same file system), so the final mv is a rename.
work="$(mktemp -d "${CACHE_ROOT}/envtest/build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod" CGO_ENABLED=0 GOWORK=off

# --- kube-apiserver and kubectl --------------------------------------------------------------
# From a wrapper module (hack/k8smodule.sh: it replaces k8s.io/kubernetes' staging modules).
if [[ ! -x "${ASSETS}/kube-apiserver" || ! -x "${ASSETS}/kubectl" ]]; then
  log "building kube-apiserver and kubectl v${K8S_VERSION} (this takes a while on a cold cache)"
  mkdir -p "${work}/k8s"
  cd "${work}/k8s"
  k8s_module envtest-k8s kube-apiserver kubectl
  # One go build for both: the second link overlaps the first one's compiles.
  mkdir -p "${work}/out"
  go build -trimpath -ldflags="-s -w" -o "${work}/out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl >&2
  # Into place only once built (a rename in the same directory tree): an interrupted build leaves
  # no half-written binary that the -x checks above would take for a finished one.
  mv "${work}/out/kube-apiserver" "${work}/out/kubectl" "${ASSETS}/"
fi

# --- etcd ------------------------------------------------------------------------------------
if [[ ! -x "${ASSETS}/etcd" ]]; then
  log "building etcd v${ETCD_VERSION}"
  mkdir -p "${work}/etcd"
  cd "${work}/etcd"
  cat > go.mod <<EOF
module switchyard.local/envtest-etcd

go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')

require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}
EOF
  cat > tools.go <<'EOF'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
EOF
  go mod tidy >&2
  go build -trimpath -ldflags="-s -w" -o "${work}/etcd-bin" go.etcd.io/etcd/server/v3 >&2
  mv "${work}/etcd-bin" "${ASSETS}/etcd"
fi

have_all || { log "build finished but binaries are missing in ${ASSETS}"; exit 1; }
log "binaries ready in ${ASSETS} after $((SECONDS - t0))s"
echo "${ASSETS}"
