#!/usr/bin/env bash
# Installs valkey-server and valkey-tools 8 from Debian's bookworm-backports when they are
# missing. Idempotent; needs root (or sudo) and the Debian mirror. Options:
#   --with-twemproxy     also Debian's nutcracker (used only by bench/);
#   --with-test-clients  also what test/integration/other-clients.test.ts and redis7-upstream
#                        run: Redis 7 (redis-server, redis-tools) as an upstream, and the clients
#                        users run in other languages: redis-py (python3-redis), redis-rb
#                        (ruby-redis) and phpredis (php-cli, php-redis); RQ (python3-rq) and
#                        Celery (python3-celery) for test/integration/colocation-{rq,celery}.test.ts.
set -euo pipefail

want_twemproxy=0
want_test_clients=0
for arg in "$@"; do
  case "$arg" in
    --with-twemproxy) want_twemproxy=1 ;;
    --with-test-clients) want_test_clients=1 ;;
    *) echo "install-valkey.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

need=()
command -v valkey-server >/dev/null 2>&1 || need+=(valkey-server)
command -v valkey-cli >/dev/null 2>&1 || need+=(valkey-tools)
if [[ $want_twemproxy == 1 ]] && ! command -v nutcracker >/dev/null 2>&1; then need+=(nutcracker); fi
if [[ $want_test_clients == 1 ]]; then
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server redis-tools)
  /usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || need+=(python3-redis)
  /usr/bin/python3 -c 'import rq' >/dev/null 2>&1 || need+=(python3-rq)
  /usr/bin/python3 -c 'import celery' >/dev/null 2>&1 || need+=(python3-celery)
  ruby -e 'require "redis"' >/dev/null 2>&1 || need+=(ruby-redis)
  php -r 'exit(extension_loaded("redis") ? 0 : 1);' >/dev/null 2>&1 || need+=(php-cli php-redis)
fi
if [[ ${#need[@]} -eq 0 ]]; then exit 0; fi

list=/etc/apt/sources.list.d/respool-backports.sources
if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "respool: adding Debian bookworm-backports to $list" >&2
  $SUDO tee "$list" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
pkgs=()
for p in "${need[@]}"; do
  case "$p" in
    valkey-server|valkey-tools) pkgs+=("$p/bookworm-backports") ;;
    *) pkgs+=("$p") ;;
  esac
done
# The Debian packages would start system services (valkey-server or redis-server on 6379, nutcracker) through
# invoke-rc.d; respool's tests start their own servers. A policy-rc.d that denies starting
# services for the length of this install keeps them from ever running, so nothing needs to be
# stopped afterwards, and no process this script did not start is touched.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# respool install-valkey.sh: no services started during this install\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  own_policy=1
fi
trap '[[ $own_policy == 1 ]] && $SUDO rm -f "$policy"' EXIT
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
# On a systemd machine the units stay disabled, so they do not start at the next boot either.
if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
  $SUDO systemctl disable --now valkey-server >/dev/null 2>&1 || true
  $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
valkey-server --version >&2
