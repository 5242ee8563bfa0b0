#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, inside a network namespace of its own, for
# `make test-install` (test/install). No Docker, no registry, no download sites: the Kubernetes
# binaries build from the Go module proxy the way hack/envtest.sh builds kube-apiserver, the
# container runtime comes from Debian, and images are imported from local OCI tarballs.
#
# Usage: hack/node.sh build           build the missing node binaries, print their directory
#        hack/node.sh build --check   print their directory; exit 1 when one is missing (builds nothing)
#        hack/node.sh deps            install the missing Debian packages (says which)
#        hack/node.sh up              deps + build, then bring the node up (idempotent: fails if one runs)
#        hack/node.sh import TAR...   import image tarballs into the node's containerd
#        hack/node.sh env             print the variables a client needs (KUBECONFIG, NETNS, ...)
#        hack/node.sh exec CMD...     run CMD inside the node's network namespace with KUBECONFIG set
#        hack/node.sh down            stop everything and remove what `up` made (safe to repeat)
#        hack/node.sh run CMD...      up, import bin/switchyard-image.tar, exec CMD, down (always)
#
# What `up` makes, and `down` removes: the network namespace $NETNS (the node's address lives on
# its loopback interface; pods hang off the bridge cni0 inside it; kube-proxy's iptables rules are
# inside it too, so the host's tables are never touched), the state directory $STATE (certs,
# configs, logs, PIDs, etcd data, containerd root), the mounts kubelet and containerd made under it.
#
# A cold build takes about 4 minutes on an idle 2-core machine and 11-15 on a busy one, after
# hack/envtest.sh's (its compiled Kubernetes packages are reused from the Go build cache: only the
# kube-apiserver link is repeated, seconds); a warm one prints the path at once. .ci/run starts it
# in the background.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
CACHE_ROOT="${SWITCHYARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
NODE_BIN="${CACHE_ROOT}/node/k8s-${K8S_VERSION}-$(go env GOOS)-$(go env GOARCH)"
NODE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
CNI_BIN_DIR="${CNI_BIN_DIR:-/usr/lib/cni}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/k8smodule.sh
source "${REPO}/hack/k8smodule.sh"

log() { echo "node: $*" >&2; }
die() { echo "node: $*" >&2; exit 1; }

have_binaries() {
  local b
  for b in "${NODE_BINARIES[@]}"; do [[ -x "${NODE_BIN}/${b}" ]] || return 1; done
}

# build: the node's Kubernetes binaries, stamped with their version (unstamped binaries report
# v0.0.0-master, which Helm's kubeVersion checks and the kubelet/apiserver skew rules reject).
# One build per version at a time: .ci/run starts this in the background early and
# `make test-install` calls it again later; the second caller waits on the lock (bounded) and then
# finds the binaries the first one moved into place.
BUILD_WAIT="${SWITCHYARD_NODE_BUILD_WAIT:-3600}"
build() {
  if have_binaries; then echo "${NODE_BIN}"; return 0; fi
  mkdir -p "${CACHE_ROOT}/node"
  local lockfd
  exec {lockfd}>"${NODE_BIN}.lock"
  if ! flock -n "${lockfd}"; then
    log "another hack/node.sh build of ${NODE_BIN} runs: waiting for it (at most ${BUILD_WAIT}s)"
    flock -w "${BUILD_WAIT}" "${lockfd}" || die "the other build of ${NODE_BIN} still holds ${NODE_BIN}.lock after ${BUILD_WAIT}s"
    have_binaries || log "the other build left no binaries (it failed or was stopped): building them here"
  fi
  # Whoever held the lock may have finished between the first look and taking it.
  if have_binaries; then exec {lockfd}>&-; echo "${NODE_BIN}"; return 0; fi
  local t0=${SECONDS}
  log "building ${NODE_BINARIES[*]} v${K8S_VERSION} into ${NODE_BIN} (cold: 4-15 minutes)"
  (
    work="$(mktemp -d "${CACHE_ROOT}/node/build.XXXXXX")"
    trap 'rm -rf "${work}"' EXIT
    export GOFLAGS="-mod=mod" CGO_ENABLED=0 GOWORK=off
    cd "${work}"
    # A wrapper module (hack/k8smodule.sh: it replaces k8s.io/kubernetes' staging modules).
    k8s_module node-k8s "${NODE_BINARIES[@]}"
    local major="${K8S_VERSION%%.*}" minor="${K8S_VERSION#*.}"
    minor="${minor%%.*}"
    local ldflags="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X ${pkg}.gitVersion=v${K8S_VERSION} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
      ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
    done
    mkdir -p "${work}/out"
    local pkgs=()
    for b in "${NODE_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${b}"); done
    go build -trimpath -ldflags="${ldflags}" -o "${work}/out/" "${pkgs[@]}" >&2
    mkdir -p "${NODE_BIN}"
    # Move into place only when every build succeeded: an interrupted build leaves no half binary.
    for b in "${NODE_BINARIES[@]}"; do mv "${work}/out/${b}" "${NODE_BIN}/${b}"; done
  )
  exec {lockfd}>&-
  have_binaries || die "build finished but binaries are missing in ${NODE_BIN}"
  log "binaries ready in ${NODE_BIN} after $((SECONDS - t0))s"
  echo "${NODE_BIN}"
}

# deps: the container runtime and the networking tools, from Debian, installed only when missing.
DEBIAN_PACKAGES=(containerd runc containernetworking-plugins iptables conntrack)
deps() {
  local missing=() p
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q 'install ok installed' || missing+=("${p}")
  done
  if ((${#missing[@]})); then
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them"
    [[ "$(id -u)" == 0 ]] || die "missing packages ${missing[*]}: install them as root (apt-get install ${missing[*]})"
    log "installing missing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
      die "apt-get install ${missing[*]} failed"
  fi
  local tool
  for tool in containerd runc ctr iptables conntrack; do
    command -v "${tool}" >/dev/null || die "${tool} not found on PATH after installing ${DEBIAN_PACKAGES[*]}"
  done
  for tool in bridge host-local loopback portmap; do
    [[ -x "${CNI_BIN_DIR}/${tool}" ]] || die "CNI plugin ${CNI_BIN_DIR}/${tool} missing (package containernetworking-plugins)"
  done
}

# --- the node ---------------------------------------------------------------------------------
NETNS="${SWITCHYARD_NODE_NETNS:-switchyard-node}"
STATE="${SWITCHYARD_NODE_STATE:-/tmp/${NETNS}}"
NODE_NAME=node-1
NODE_IP=10.200.0.1        # on the namespace's loopback interface: the node's own address
POD_CIDR=10.201.0.0/16    # the controller-manager gives the node 10.201.0.0/24
NODE_POD_CIDR=10.201.0.0/24
SERVICE_CIDR=10.202.0.0/16
API_CLUSTER_IP=10.202.0.1
CGROUP_ROOT="/${NETNS}"   # kubelet's cgroupRoot; the daemons run in ${CGROUP_ROOT}/daemons
PAUSE_IMAGE="switchyard.local/pause:1"
CTR_SOCK="${STATE}/containerd/containerd.sock"
WAIT_SECONDS="${SWITCHYARD_NODE_WAIT:-120}"
DAEMONS=(etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet kube-proxy)

in_ns() { nsenter --net="/run/netns/${NETNS}" -- "$@"; }

kctl() { KUBECONFIG="${STATE}/admin.kubeconfig" in_ns "${ENVTEST_DIR}/kubectl" "$@"; }

# wait_for SECONDS WHAT CMD...: run CMD once a second until it succeeds, at most SECONDS times.
wait_for() {
  local limit="$1" what="$2" i
  shift 2
  for ((i = 0; i < limit; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  log "timed out after ${limit}s waiting for ${what}"
  return 1
}

# Every cgroup v1 hierarchy (and the unified one) the host mounts under /sys/fs/cgroup.
cgroup_hierarchies() {
  local d
  for d in /sys/fs/cgroup/*/; do
    [[ -f "${d}cgroup.procs" ]] && echo "${d%/}"
  done
}

make_cgroups() {
  local h
  for h in $(cgroup_hierarchies); do
    mkdir -p "${h}${CGROUP_ROOT}/daemons"
    if [[ -f "${h}/cpuset.cpus" ]]; then
      # A new cpuset cgroup starts with no CPUs and no memory nodes: inherit the parent's.
      local dir
      for dir in "${h}${CGROUP_ROOT}" "${h}${CGROUP_ROOT}/daemons"; do
        cat "${h}/cpuset.cpus" > "${dir}/cpuset.cpus"
        cat "${h}/cpuset.mems" > "${dir}/cpuset.mems"
      done
    fi
  done
}

# start NAME CMD...: start a daemon inside the namespace, in the daemons cgroup, logging to
# ${STATE}/logs/NAME.log, its PID in ${STATE}/pids/NAME.
start() {
  local name="$1" h
  shift
  (
    # Join the daemons cgroup first, so the daemon and everything it forks (containerd's shims)
    # can be found and stopped by PID at teardown.
    for h in $(cgroup_hierarchies); do echo "${BASHPID}" > "${h}${CGROUP_ROOT}/daemons/cgroup.procs"; done
    exec setsid nsenter --net="/run/netns/${NETNS}" -- "$@" > "${STATE}/logs/${name}.log" 2>&1 < /dev/null
  ) &
  echo $! > "${STATE}/pids/${name}"
}

gen_certs() {
  local pki="${STATE}/pki"
  mkdir -p "${pki}"
  (
    cd "${pki}"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=switchyard-node-ca" 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # cert NAME SUBJECT [SAN]: a client (and, with a SAN, serving) certificate signed by the CA.
    cert() {
      local ext="extendedKeyUsage=clientAuth"
      [[ -n "${3:-}" ]] && ext="extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$3"
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 \
        -extfile <(printf 'keyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "${ext}") 2>/dev/null
      rm -f "$1.csr"
    }
    cert apiserver "/CN=kube-apiserver" "IP:${NODE_IP},IP:${API_CLUSTER_IP},IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    cert admin "/O=system:masters/CN=switchyard-node-admin"
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    cert controller-manager "/CN=system:kube-controller-manager"
    cert scheduler "/CN=system:kube-scheduler"
    cert kubelet "/O=system:nodes/CN=system:node:${NODE_NAME}"
    cert kube-proxy "/CN=system:kube-proxy"
  )
  local who
  for who in admin controller-manager scheduler kubelet kube-proxy; do
    cat > "${STATE}/${who}.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: node
    cluster: {server: "https://${NODE_IP}:6443", certificate-authority: "${pki}/ca.crt"}
users:
  - name: ${who}
    user: {client-certificate: "${pki}/${who}.crt", client-key: "${pki}/${who}.key"}
contexts:
  - name: node
    context: {cluster: node, user: ${who}}
current-context: node
KUBECONFIG
  done
}

write_configs() {
  mkdir -p "${STATE}/containerd" "${STATE}/cni/net.d" "${STATE}/kubelet"
  cat > "${STATE}/containerd/config.toml" <<TOML
version = 2
root = "${STATE}/containerd/root"
state = "${STATE}/containerd/state"
# No btrfs, zfs, devmapper or aufs on this machine: overlayfs only.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "${CTR_SOCK}"
[ttrpc]
  address = "${STATE}/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "${STATE}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # The machine lacks CAP_SYS_RESOURCE: runc cannot set a negative oom_score_adj.
  restrict_oom_score_adj = true
  # Pod network namespaces are pinned under the state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${STATE}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${STATE}/cni/net.d"
TOML
  cat > "${STATE}/cni/net.d/10-switchyard-node.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "switchyard-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "${STATE}/cni/ipam", "ranges": [[{"subnet": "${NODE_POD_CIDR}"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  cat > "${STATE}/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The host runs cgroup v1 (plus a unified mount), without systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ${CGROUP_ROOT}
containerRuntimeEndpoint: unix://${CTR_SOCK}
address: ${NODE_IP}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${STATE}/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
failSwapOn: false
# The images are imported, not pulled: never garbage-collect them; evict only when the disk is
# really full (the shared disk is often past the 85% default).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
YAML
  cat > "${STATE}/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_CIDR}
clientConnection: {kubeconfig: ${STATE}/kube-proxy.kubeconfig}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the conntrack sysctls as they are (nf_conntrack_max is not the namespace's to set).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
}

running() { [[ -f "${STATE}/pids/$1" ]] && kill -0 "$(cat "${STATE}/pids/$1")" 2>/dev/null; }

check_prereqs() {
  [[ "$(id -u)" == 0 ]] || die "needs root (network namespaces, mounts, cgroups, iptables): run as root"
  command -v nsenter >/dev/null || die "nsenter not found (package util-linux)"
  command -v ip >/dev/null || die "ip not found (package iproute2)"
  command -v openssl >/dev/null || die "openssl not found (package openssl)"
  [[ -d /sys/fs/cgroup/pids || -d /sys/fs/cgroup/memory ]] || die "no cgroup v1 hierarchies under /sys/fs/cgroup (this tooling is written for the cgroup v1 hosts of this project)"
  if ! ip netns add "${NETNS}-probe" 2>/dev/null; then
    die "cannot create a network namespace (ip netns add): needs CAP_SYS_ADMIN and CAP_NET_ADMIN"
  fi
  ip netns del "${NETNS}-probe"
}

up() {
  check_prereqs
  if [[ -e "/run/netns/${NETNS}" || -d "${STATE}" ]]; then
    local d
    for d in "${DAEMONS[@]}"; do
      running "${d}" && die "a node is up already (${d} runs, PID $(cat "${STATE}/pids/${d}")): hack/node.sh down stops it"
    done
    log "removing what an interrupted run left (network namespace ${NETNS}, ${STATE})"
    down
  fi
  deps
  local bin
  bin="$(build)"
  ENVTEST_DIR="$("${REPO}/hack/envtest.sh")"
  local t0=${SECONDS}
  rm -rf "${STATE}"
  mkdir -p "${STATE}/logs" "${STATE}/pids"
  if [[ ! -f "${NODE_BIN}/pause.tar" ]]; then
    (cd "${REPO}" && go run ./hack/node pause-image --out "${NODE_BIN}/pause.tar" --tag "${PAUSE_IMAGE}")
  fi
  gen_certs
  write_configs

  ip netns add "${NETNS}"
  ip -n "${NETNS}" link set lo up
  ip -n "${NETNS}" addr add "${NODE_IP}/32" dev lo
  # Locally made connections to ClusterIPs need a route before kube-proxy's DNAT rewrites them.
  ip -n "${NETNS}" route add "${SERVICE_CIDR}" dev lo src "${NODE_IP}"
  in_ns sysctl -qw net.ipv4.ip_forward=1
  # Replies between two pods on the bridge pass through conntrack (the Service DNAT is undone).
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1
  make_cgroups
  # containerd 1.6 puts its shims' sockets under /run/containerd/s and the CNI result cache under
  # /var/lib/cni whatever its config says: note which of them this node creates, for down.
  local d
  for d in /run/containerd /run/containerd/s /var/lib/cni /var/lib/cni/results; do
    [[ -e "${d}" ]] || echo "${d}" >> "${STATE}/host-dirs"
  done

  local pki="${STATE}/pki"
  start etcd "${ENVTEST_DIR}/etcd" --data-dir "${STATE}/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380 \
    --unsafe-no-fsync
  start containerd containerd --config "${STATE}/containerd/config.toml"
  start kube-apiserver "${bin}/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "${NODE_IP}" --bind-address 0.0.0.0 --secure-port 6443 \
    --kubelet-preferred-address-types InternalIP \
    --service-cluster-ip-range "${SERVICE_CIDR}" --authorization-mode Node,RBAC --allow-privileged=true \
    --client-ca-file "${pki}/ca.crt" --tls-cert-file "${pki}/apiserver.crt" --tls-private-key-file "${pki}/apiserver.key" \
    --kubelet-client-certificate "${pki}/apiserver-kubelet-client.crt" --kubelet-client-key "${pki}/apiserver-kubelet-client.key" \
    --service-account-key-file "${pki}/sa.pub" --service-account-signing-key-file "${pki}/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local --cert-dir "${STATE}/apiserver"
  wait_for "${WAIT_SECONDS}" "kube-apiserver /readyz" kctl get --raw /readyz || { logs_tail kube-apiserver etcd; die "kube-apiserver did not become ready"; }

  start kube-controller-manager "${bin}/kube-controller-manager" --kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --authentication-kubeconfig "${STATE}/controller-manager.kubeconfig" --authorization-kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --allocate-node-cidrs --cluster-cidr "${POD_CIDR}" --node-cidr-mask-size 24 \
    --service-cluster-ip-range "${SERVICE_CIDR}" --use-service-account-credentials \
    --service-account-private-key-file "${pki}/sa.key" --root-ca-file "${pki}/ca.crt" \
    --cluster-signing-cert-file "${pki}/ca.crt" --cluster-signing-key-file "${pki}/ca.key"
  start kube-scheduler "${bin}/kube-scheduler" --kubeconfig "${STATE}/scheduler.kubeconfig" \
    --authentication-kubeconfig "${STATE}/scheduler.kubeconfig" --authorization-kubeconfig "${STATE}/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
  wait_for "${WAIT_SECONDS}" "containerd" in_ns ctr -a "${CTR_SOCK}" version || { logs_tail containerd; die "containerd did not start"; }
  in_ns ctr -a "${CTR_SOCK}" -n k8s.io images import --no-unpack=false "${NODE_BIN}/pause.tar" >/dev/null
  start kubelet "${bin}/kubelet" --config "${STATE}/kubelet/config.yaml" --kubeconfig "${STATE}/kubelet.kubeconfig" \
    --root-dir "${STATE}/kubelet/root" --cert-dir "${STATE}/kubelet/pki" --node-ip "${NODE_IP}" --hostname-override "${NODE_NAME}"
  start kube-proxy "${bin}/kube-proxy" --config "${STATE}/kube-proxy.yaml"
  wait_for "${WAIT_SECONDS}" "node ${NODE_NAME} Ready" kctl wait --for=condition=Ready "node/${NODE_NAME}" --timeout=1s ||
    { logs_tail kubelet containerd; die "the node did not become Ready"; }
  log "node Ready after $((SECONDS - t0))s"
  wait_for "${WAIT_SECONDS}" "the default ServiceAccount" kctl get serviceaccount default -n default ||
    { logs_tail kube-controller-manager; die "the controller-manager made no default ServiceAccount"; }
  log "cluster usable after $((SECONDS - t0))s (KUBECONFIG=${STATE}/admin.kubeconfig, network namespace ${NETNS})"
}

logs_tail() {
  local n
  for n in "$@"; do
    echo "--- last lines of ${STATE}/logs/${n}.log" >&2
    tail -n 25 "${STATE}/logs/${n}.log" >&2 || true
  done
}

import_images() {
  local tar
  for tar in "$@"; do
    [[ -f "${tar}" ]] || die "no image tarball ${tar} (make image builds bin/switchyard-image.tar)"
    in_ns ctr -a "${CTR_SOCK}" -n k8s.io images import "${tar}" >&2 || die "ctr images import ${tar} failed"
  done
}

# pids_in_cgroups: every process in the node's cgroups (daemons, shims, containers).
pids_in_cgroups() {
  local h
  for h in $(cgroup_hierarchies); do
    [[ -d "${h}${CGROUP_ROOT}" ]] || continue
    find "${h}${CGROUP_ROOT}" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un
}

down() {
  local name pid i
  # The daemons first, newest first, politely; then whatever is left in the node's cgroups
  # (containers, shims), by PID.
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    name="${DAEMONS[i]}"
    running "${name}" && kill -TERM "$(cat "${STATE}/pids/${name}")" 2>/dev/null || true
  done
  for ((i = 0; i < 20; i++)); do
    local alive=0
    for name in "${DAEMONS[@]}"; do running "${name}" && alive=1; done
    ((alive)) || break
    sleep 0.5
  done
  for ((i = 0; i < 10; i++)); do
    local left
    left="$(pids_in_cgroups)"
    [[ -z "${left}" ]] && break
    # shellcheck disable=SC2086
    kill -KILL ${left} 2>/dev/null || true
    sleep 0.5
  done
  [[ -z "$(pids_in_cgroups)" ]] || log "processes still in ${CGROUP_ROOT} cgroups: $(pids_in_cgroups | tr '\n' ' ')"
  # Mounts under the state directory (container root filesystems, pod volumes, pinned pod
  # network namespaces), deepest first.
  if [[ -d "${STATE}" ]]; then
    local m
    for ((i = 0; i < 3; i++)); do
      mapfile -t mounts < <(awk -v s="${STATE}" '$5 == s || index($5, s "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
      ((${#mounts[@]})) || break
      for m in "${mounts[@]}"; do umount "${m}" 2>/dev/null || umount -l "${m}" 2>/dev/null || true; done
    done
  fi
  # The cgroups, deepest first.
  local h
  for h in $(cgroup_hierarchies); do
    [[ -d "${h}${CGROUP_ROOT}" ]] && find "${h}${CGROUP_ROOT}" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  # The namespace holds the node's address, the cni0 bridge, the pods' veth ends and every
  # iptables chain kube-proxy wrote: deleting it removes them all (the host's tables are never
  # touched, so no legacy table is ever listed or created).
  if [[ -e "/run/netns/${NETNS}" ]]; then
    ip netns del "${NETNS}" || log "could not delete network namespace ${NETNS}"
  fi
  # The pods' sandboxes are not torn down through the CRI, so their shim sockets and CNI results
  # stay: remove the directories this node created, and its network's results in any case.
  if [[ -f "${STATE}/host-dirs" ]]; then
    sort -r "${STATE}/host-dirs" | while read -r d; do rm -rf "${d}"; done
  fi
  rm -f /var/lib/cni/results/switchyard-node-*
  rm -rf "${STATE}"
  local leftover=()
  [[ -e "/run/netns/${NETNS}" ]] && leftover+=("network namespace ${NETNS}")
  grep -q " ${STATE}" /proc/self/mountinfo && leftover+=("mounts under ${STATE}")
  for h in $(cgroup_hierarchies); do [[ -d "${h}${CGROUP_ROOT}" ]] && leftover+=("cgroup ${h}${CGROUP_ROOT}"); done
  ((${#leftover[@]} == 0)) || die "teardown left: ${leftover[*]}"
  log "node down: processes stopped, mounts, cgroups and network namespace ${NETNS} removed"
}

print_env() {
  echo "KUBECONFIG=${STATE}/admin.kubeconfig"
  echo "SWITCHYARD_NODE_NETNS=${NETNS}"
  echo "SWITCHYARD_NODE_STATE=${STATE}"
  echo "SWITCHYARD_NODE_IP=${NODE_IP}"
  echo "SWITCHYARD_NODE_CTR=ctr -a ${CTR_SOCK} -n k8s.io"
}

node_exec() {
  [[ -e "/run/netns/${NETNS}" ]] || die "no node: hack/node.sh up first"
  local envtest
  envtest="$("${REPO}/hack/envtest.sh")"
  KUBECONFIG="${STATE}/admin.kubeconfig" SWITCHYARD_NODE_NETNS="${NETNS}" SWITCHYARD_NODE_STATE="${STATE}" \
    SWITCHYARD_NODE_IP="${NODE_IP}" PATH="${envtest}:${PATH}" in_ns "$@"
}

case "${1:-}" in
  build)
    if [[ "${2:-}" == "--check" ]]; then have_binaries || exit 1; echo "${NODE_BIN}"; exit 0; fi
    build
    ;;
  deps) deps ;;
  up) up ;;
  import) shift; import_images "$@" ;;
  env) print_env ;;
  exec) shift; node_exec "$@" ;;
  down) down ;;
  run)
    shift
    # One node per machine (one network namespace name, one containerd): a second run waits for
    # the first instead of clearing its cluster away as an interrupted run's leftovers. Bounded.
    exec 9>"/run/switchyard-node.lock"
    if ! flock -w 1800 9; then die "another hack/node.sh run holds /run/switchyard-node.lock for 30 minutes"; fi
    up
    trap down EXIT
    import_images "${REPO}/bin/switchyard-image.tar"
    node_exec "$@"
    ;;
  *) die "usage: hack/node.sh build|deps|up|import|env|exec|down|run (see the header)" ;;
esac
