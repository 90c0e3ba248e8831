#!/usr/bin/env bash
# Installs what the report's browser test (tests/report.rs) drives, once:
#   Chromium from Debian's packages (/usr/bin/chromium; apt-get, as root or through sudo), and
#   playwright-core from the npm registry into target/browser/ (the test's driver; it uses the
#   Debian Chromium, never a browser of its own: PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD).
# Idempotent. Prints the Chromium binary and the driver's directory.
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYWRIGHT_VERSION=1.57.0
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
        echo "error: Chromium is not installed and this user cannot run apt-get: install Debian's \`chromium\` package" >&2
        exit 1
    fi
    $SUDO apt-get install -y --no-install-recommends chromium >&2 || {
        $SUDO apt-get update >&2 && $SUDO apt-get install -y --no-install-recommends chromium >&2
    }
fi
DIR="$PWD/target/browser"
# Installed and whole: a copy of target/ that lost files (seen 2026-12-07: lib/*ServerImpl.js
# missing) fails to load and is installed again.
if [ -f "$DIR/node_modules/playwright-core/package.json" ] \
    && ! node -e "require(process.argv[1])" "$DIR/node_modules/playwright-core" >/dev/null 2>&1; then
    echo "playwright-core in $DIR does not load: installing it again" >&2
    rm -rf "$DIR/node_modules"
fi
if [ ! -f "$DIR/node_modules/playwright-core/package.json" ]; then
    command -v npm >/dev/null || { echo "error: npm (Node.js) is needed to install playwright-core" >&2; exit 1; }
    mkdir -p "$DIR"
    (cd "$DIR" && [ -f package.json ] || echo '{"name": "rubric-browser-test", "private": true}' > package.json)
    (cd "$DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_VERSION" >&2)
fi
echo /usr/bin/chromium
echo "$DIR"
