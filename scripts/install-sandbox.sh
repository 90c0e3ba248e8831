#!/usr/bin/env bash
# Installs what sandboxed code execution (`src/sandbox`, the `exec` feature) runs programs
# under, once: bubblewrap (`bwrap`) from Debian's packages, and util-linux's `prlimit` and
# `setpriv` if they are missing (apt-get, as root or through sudo). Idempotent: installs
# nothing when every tool is there. Prints each tool's path. docs/sandbox.md, "Code execution".
set -euo pipefail
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
{ command -v prlimit >/dev/null && command -v setpriv >/dev/null; } || missing+=(util-linux)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
        echo "error: ${missing[*]} not installed and this user cannot run apt-get: install Debian's \`${missing[*]}\`" >&2
        exit 1
    fi
    command -v apt-get >/dev/null || {
        echo "error: no apt-get: install ${missing[*]} (bwrap, prlimit, setpriv) with this system's package manager" >&2
        exit 1
    }
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
        $SUDO apt-get update >&2 && $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
    }
fi
for tool in bwrap prlimit setpriv bash; do
    command -v "$tool" || { echo "error: \`$tool\` is still missing" >&2; exit 1; }
done
