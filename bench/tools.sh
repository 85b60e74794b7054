#!/usr/bin/env bash
# Installs what `npm run bench` drives, only when missing: wrk (HTTP/1.1 load), h2load (gRPC over
# h2c, Debian nghttp2-client) and Kannel (bearerbox, smsbox; fakesmsc from kannel-extras).
set -euo pipefail
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client)
if [ ! -x /usr/sbin/bearerbox ] || [ ! -x /usr/sbin/smsbox ]; then missing+=(kannel); fi
[ -x /usr/lib/kannel/test/fakesmsc ] || missing+=(kannel-extras)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "bench: installing ${missing[*]}" >&2
made_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  # invoke-rc.d asks this file whether a package may start its service: 101 = no (Kannel's own
  # service must not take its default ports; the bench starts its own boxes on free ports).
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
fi
ok=1
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) || ok=""
if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
if [ -z "$ok" ]; then echo "bench: installing ${missing[*]} failed" >&2; exit 1; fi
if [ -x /etc/init.d/kannel ]; then /etc/init.d/kannel stop >/dev/null 2>&1 || true; fi
