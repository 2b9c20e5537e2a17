#!/usr/bin/env bash
# Installs valkey-server and valkey-tools 8 from Debian's bookworm-backports when they are
# missing. Idempotent; needs root (or sudo) and the Debian mirror. Optional: --with-twemproxy
# also installs Debian's nutcracker (used only by bench/).
set -euo pipefail

want_twemproxy=0
[[ "${1:-}" == "--with-twemproxy" ]] && want_twemproxy=1

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

need=()
command -v valkey-server >/dev/null 2>&1 || need+=(valkey-server)
command -v valkey-cli >/dev/null 2>&1 || need+=(valkey-tools)
if [[ $want_twemproxy == 1 ]] && ! command -v nutcracker >/dev/null 2>&1; then need+=(nutcracker); fi
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
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
# The Debian package starts a system service on 6379; respool's tests start their own servers.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now valkey-server >/dev/null 2>&1 || true; fi
pkill -x valkey-server >/dev/null 2>&1 || true
pkill -x nutcracker >/dev/null 2>&1 || true
valkey-server --version >&2
