#!/usr/bin/env bash
# The Debian packages the tests need: the one list. `npm test` and .ci/run call this.
#
#   scripts/system-packages.sh            as root with apt-get: installs what is missing (one
#                                         `apt-get update`) and fails if that fails; otherwise prints
#                                         ONE line naming what is missing and the command that
#                                         installs it (the suites needing it are then skipped)
#   scripts/system-packages.sh --list     every package of the list, one a line
#   scripts/system-packages.sh --skipped  the missing packages this run cannot install (not root or
#                                         no apt-get), one a line: test/support/system-packages.ts
#                                         skips the suites that need them
#   scripts/system-packages.sh --bench    as the first form, with what `npm run bench` drives too
#                                         (wrk, h2load); it fails when something is missing
#
# Each package is probed by the files its tests use, not by dpkg (a machine without apt may have
# them from elsewhere). What needs which: test/support/system-packages.ts (NEEDS).
set -euo pipefail

PACKAGES=(
  postgresql          # initdb, pg_ctl: the private cluster of `npm test`'s PostgreSQL pass and of the outage test
  kannel              # bearerbox, smsbox: CARRIER=kannel tests, crash safety
  kannel-extras       # fakesmsc, the test SMSC
  chromium            # the /docs page test (headless)
  python3-grpcio      # the generated Python client test
  python3-grpc-tools  # generates that client
  libnet-smpp-perl    # Net::SMPP: the test SMSC of the SMPP carrier
  stunnel4            # TLS in front of that SMSC
  redis-server        # the shared limits' Redis store (test/support/private-redis.ts)
)
# `npm run bench` only (--bench): the load generators; Kannel, its peer, is in the list above.
BENCH_PACKAGES=(
  wrk                 # HTTP/1.1 load (Kannel, REST, the floor routes)
  nghttp2-client      # h2load: gRPC load over h2c
)
mode="${1:-}"
[ "$mode" = --bench ] && PACKAGES+=("${BENCH_PACKAGES[@]}")

# 0 when the package's files the tests use are there.
present() {
  case "$1" in
    postgresql)
      local d
      for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && return 0
      done
      return 1 ;;
    kannel) [ -x /usr/sbin/bearerbox ] && [ -x /usr/sbin/smsbox ] ;;
    kannel-extras) [ -x /usr/lib/kannel/test/fakesmsc ] ;;
    chromium) [ -x /usr/bin/chromium ] ;;
    python3-grpcio) [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import grpc" >/dev/null 2>&1 ;;
    python3-grpc-tools) [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import grpc_tools.protoc" >/dev/null 2>&1 ;;
    libnet-smpp-perl) [ -x /usr/bin/perl ] && /usr/bin/perl -MNet::SMPP -e 1 >/dev/null 2>&1 ;;
    stunnel4) [ -x /usr/bin/stunnel4 ] || [ -x /usr/bin/stunnel ] ;;
    redis-server) [ -x /usr/bin/redis-server ] ;;
    wrk) command -v wrk >/dev/null 2>&1 ;;
    nghttp2-client) command -v h2load >/dev/null 2>&1 ;;
    # A package can be named on the command line that the list lacks: probed by dpkg.
    *) dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q "install ok installed" ;;
  esac
}

missing=()
for p in "${PACKAGES[@]}"; do present "$p" || missing+=("$p"); done

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

case "$mode" in
  --list) printf '%s\n' "${PACKAGES[@]}"; exit 0 ;;
  --skipped)
    if ! can_install && [ ${#missing[@]} -gt 0 ]; then printf '%s\n' "${missing[@]}"; fi
    exit 0 ;;
  ""|--bench) ;;
  *) echo "usage: $0 [--list|--skipped|--bench]" >&2; exit 2 ;;
esac

[ ${#missing[@]} -eq 0 ] && exit 0

if ! can_install; then
  if command -v apt-get >/dev/null 2>&1; then how="sudo apt-get install -y ${missing[*]}"; else how="apt-get install -y ${missing[*]} (Debian/Ubuntu; elsewhere their equivalents)"; fi
  echo "system packages missing: ${missing[*]}; the tests that need them are skipped. Install them with: $how" >&2
  # The bench cannot skip a peer or its load generator.
  [ "$mode" = --bench ] && exit 1
  exit 0
fi

echo "system packages: installing ${missing[*]}" >&2
made_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  # invoke-rc.d asks this file whether a package may start its service: 101 = no. PostgreSQL's
  # own cluster and Kannel's boxes must not start (or take their default ports): the tests start
  # theirs on free ports.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
fi
ok=1
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) || ok=""
if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
# Belt and braces where a service did start anyway (no systemd here: the SysV script).
if [ -x /etc/init.d/kannel ]; then /etc/init.d/kannel stop >/dev/null 2>&1 || true; fi
if [ -z "$ok" ]; then echo "system packages: installing ${missing[*]} failed" >&2; exit 1; fi
still=()
for p in "${missing[@]}"; do present "$p" || still+=("$p"); done
if [ ${#still[@]} -gt 0 ]; then echo "system packages: installed, but still not usable: ${still[*]}" >&2; exit 1; fi
