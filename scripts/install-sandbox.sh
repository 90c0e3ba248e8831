#!/usr/bin/env bash
# Installs what sandboxed code execution (`src/sandbox`, the `exec` feature) runs programs
# under, once: bubblewrap (`bwrap`) from Debian's packages (apt-get, as root or through sudo).
# Idempotent: installs nothing when it is there. Prints its path. docs/sandbox.md, "Code
# execution". (The user, rlimits and descriptors are set by `rubric` itself before it executes
# bubblewrap: no other tool is needed.)
set -euo pipefail
if ! command -v bwrap >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
        echo "error: bubblewrap is not installed and this user cannot run apt-get: install Debian's \`bubblewrap\`" >&2
        exit 1
    fi
    command -v apt-get >/dev/null || {
        echo "error: no apt-get: install bubblewrap (bwrap) with this system's package manager" >&2
        exit 1
    }
    $SUDO apt-get install -y --no-install-recommends bubblewrap >&2 || {
        $SUDO apt-get update >&2 && $SUDO apt-get install -y --no-install-recommends bubblewrap >&2
    }
fi
command -v bwrap || { echo "error: \`bwrap\` is still missing" >&2; exit 1; }
