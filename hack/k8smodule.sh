# Sourced by hack/envtest.sh and hack/node.sh: the wrapper module that builds commands of
# k8s.io/kubernetes from the Go module proxy.
#
# k8s_module NAME CMD... writes, in the current directory, module switchyard.local/NAME requiring
# k8s.io/kubernetes v${K8S_VERSION} and importing k8s.io/kubernetes/cmd/CMD for each CMD, then
# tidies it. k8s.io/kubernetes points its staging modules (k8s.io/api, k8s.io/client-go, ...) at
# ./staging with replace directives that do not apply to a dependency, so the wrapper replaces
# each of them with the published v0.X.Y of the same release.
k8s_module() {
  local name="$1" gomod staging_version cmd
  shift
  gomod="$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  staging_version="v0.${K8S_VERSION#1.}"
  {
    echo "module switchyard.local/${name}"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')"
    echo
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    echo
    echo "replace ("
    grep -E '^[[:space:]]*k8s\.io/[a-z0-9-]+ => \./staging/' "${gomod}" |
      awk -v v="${staging_version}" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > go.mod
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    for cmd in "$@"; do echo "	_ \"k8s.io/kubernetes/cmd/${cmd}\""; done
    echo ")"
  } > tools.go
  go mod tidy >&2
}
