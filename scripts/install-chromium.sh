#!/usr/bin/env bash
# Installs Debian's chromium when /usr/bin/chromium is missing: the status page's browser test
# (test/integration/status-page.test.ts) drives it headless with puppeteer-core, which downloads
# no browser of its own. Idempotent; needs root (or sudo) and the Debian mirror. `npm run setup`
# runs it after scripts/install-valkey.sh.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then exit 0; fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
echo "respool: installing Debian's chromium (for the status page's browser test)" >&2
if ! $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
/usr/bin/chromium --version >&2
