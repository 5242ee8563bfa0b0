#!/usr/bin/env bash
# A real Redis for the fleet store's tests (internal/fleet, cmd/switchyard's fleet tests):
# Debian's redis-server, installed when missing, the way hack/node.sh installs its packages. The
# tests start their own servers on random loopback ports (internal/fleet/redistest); this script
# only makes sure the binary is there and prints its path.
#
# Usage: hack/redis.sh          install redis-server when missing (as root), print its path
#        hack/redis.sh --check  print its path; exit 1 when it is missing (installs nothing)
#
# The tests find it through $SWITCHYARD_REDIS_SERVER, then PATH; they skip without one unless
# $SWITCHYARD_REQUIRE_REDIS is set (make test sets it, so a clean CI machine cannot pass by skipping).
set -euo pipefail

log() { echo "redis: $*" >&2; }
die() { echo "redis: $*" >&2; exit 1; }

find_server() {
  if [[ -n "${SWITCHYARD_REDIS_SERVER:-}" ]]; then
    [[ -x "${SWITCHYARD_REDIS_SERVER}" ]] || return 1
    echo "${SWITCHYARD_REDIS_SERVER}"
    return 0
  fi
  command -v redis-server
}

if bin="$(find_server)"; then echo "${bin}"; exit 0; fi
[[ "${1:-}" == "--check" ]] && exit 1

PACKAGE=redis-server
command -v apt-get >/dev/null || die "redis-server missing and no apt-get to install it (set SWITCHYARD_REDIS_SERVER to a redis-server 6 or later, or a valkey-server)"
[[ "$(id -u)" == 0 ]] || die "redis-server missing: install it as root (apt-get install ${PACKAGE})"
log "installing the missing Debian package: ${PACKAGE}"
DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGE}" >&2 ||
  die "apt-get install ${PACKAGE} failed"
# The package starts a system service on 6379 where an init system runs; the tests do not use it.
bin="$(find_server)" || die "redis-server not found on PATH after installing ${PACKAGE}"
echo "${bin}"
