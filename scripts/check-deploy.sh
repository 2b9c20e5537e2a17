#!/usr/bin/env bash
# Checks the deployment files that have a checker of their own: the Prometheus alert rules in
# deploy/prometheus/ (`promtool check rules`, then the cases of alerts.test.yml with
# `promtool test rules`). The Kubernetes manifests, the Grafana dashboard and the Dockerfile
# are checked by test/unit/deploy-manifests.test.ts.
#
# promtool comes from Debian's `prometheus` package. Installing that package would create a
# user and start a Prometheus server, so only the promtool binary is taken out of it
# (apt-get download + dpkg-deb -x) and put in /usr/local/bin. Idempotent: a promtool on the
# PATH (or in $PROMTOOL) is used as it is. Needs root (or sudo) only for that first install.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

promtool="${PROMTOOL:-}"
if [[ -z $promtool ]]; then
  if command -v promtool >/dev/null 2>&1; then
    promtool="$(command -v promtool)"
  else
    echo "check-deploy: installing promtool from Debian's prometheus package" >&2
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    chmod 0755 "$tmp"
    download() { (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root prometheus >/dev/null); }
    if ! download; then
      $SUDO apt-get update -qq
      download
    fi
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
    $SUDO install -m 0755 "$tmp/root/usr/bin/promtool" /usr/local/bin/promtool
    promtool=/usr/local/bin/promtool
  fi
fi

"$promtool" --version 2>&1 | head -n 1 >&2
"$promtool" check rules deploy/prometheus/alerts.yml
"$promtool" test rules deploy/prometheus/alerts.test.yml
