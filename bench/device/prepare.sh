#!/usr/bin/env bash
# Builds .carry/device/ (git-ignored), everything the device machine lacks to run this project's
# compiled JS with Node.js + WebGPU (Dawn over Vulkan):
#   node.xz               this machine's node binary, symbols stripped, xz-compressed
#   node_modules.tar.xz   runtime node_modules (closure of package.json "dependencies",
#                         webgpu trimmed to linux-x64); see list-runtime-modules.mjs
#   gl/*.deb              Vulkan loader + GL dispatch libraries for amd64 (Debian), unpacked
#                         there with dpkg -x (the device image has none)
# Only .carry/device/ travels: other work keeps large scratch data elsewhere under .carry/.
# Idempotent: each part is rebuilt only when its inputs changed (stamp files beside them).
# Usage: bash bench/device/prepare.sh [package ...]   (packages: override the module roots)
# Then run on the device with carry [".carry/device", "dist"]: see bench/device/README.md.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
carry="$repo_root/.carry/device"
mkdir -p "$carry/gl"

if [[ "$(uname -m)" != "x86_64" ]]; then
  echo "prepare.sh: this machine is $(uname -m); the device is x86-64, so its node and dawn.node would not run there" >&2
  exit 1
fi
if ! git -C "$repo_root" check-ignore -q "$carry"; then
  echo "prepare.sh: .carry/device is not git-ignored; add /.carry/ to .gitignore so it does not travel twice" >&2
  exit 1
fi

human() { numfmt --to=iec-i --suffix=B "$1"; }

# --- node -------------------------------------------------------------------------------------
node_src="$(readlink -f "$(command -v node)")"
node_stamp="$(stat -c '%n %s %Y' "$node_src")"
if [[ ! -s "$carry/node.xz" || "$(cat "$carry/node.stamp" 2>/dev/null)" != "$node_stamp" ]]; then
  echo "prepare.sh: compressing $node_src ($("$node_src" --version)); about a minute on 2 cores"
  tmp="$(mktemp -d)"
  # --strip-all drops debug info and .symtab only; .dynsym stays, so native addons still link.
  strip --strip-all -o "$tmp/node" "$node_src"
  "$tmp/node" -e 'process.exit(0)' # a stripped binary that no longer starts must not travel
  xz -T0 -9 -c "$tmp/node" >"$carry/node.xz.partial"
  rm -rf "$tmp"
  mv "$carry/node.xz.partial" "$carry/node.xz"
  echo "$node_stamp" >"$carry/node.stamp"
fi

# --- runtime node_modules ---------------------------------------------------------------------
file_list="$(mktemp)"
trap 'rm -f "$file_list"' EXIT
(cd "$repo_root" && node bench/device/list-runtime-modules.mjs "$@") >"$file_list"
modules_stamp="$( (cd "$repo_root" && xargs -d '\n' stat -c '%n %s %Y' <"$file_list") | sha256sum | cut -d' ' -f1)"
if [[ ! -s "$carry/node_modules.tar.xz" || "$(cat "$carry/node_modules.stamp" 2>/dev/null)" != "$modules_stamp" ]]; then
  echo "prepare.sh: packing $(wc -l <"$file_list") runtime module files"
  # Archive paths are relative to node_modules/ so the tree can be unpacked anywhere.
  sed 's|^node_modules/||' "$file_list" >"$file_list.rel"
  tar -C "$repo_root/node_modules" -cf - --owner=0 --group=0 -T "$file_list.rel" \
    | xz -T0 -6 >"$carry/node_modules.tar.xz.partial"
  rm -f "$file_list.rel"
  mv "$carry/node_modules.tar.xz.partial" "$carry/node_modules.tar.xz"
  echo "$modules_stamp" >"$carry/node_modules.stamp"
fi

# --- Vulkan / GL loader debs (amd64) ----------------------------------------------------------
gl_packages=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
missing=()
for pkg in "${gl_packages[@]}"; do
  compgen -G "$carry/gl/${pkg}_*_amd64.deb" >/dev/null || missing+=("$pkg")
done
if ((${#missing[@]} > 0)); then
  echo "prepare.sh: downloading ${missing[*]} (amd64) with apt-get"
  apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64 -oAPT::Sandbox::User=root)
  mkdir -p /tmp/amd64/partial
  apt-get "${apt_opts[@]}" update -qq
  (cd "$carry/gl" && apt-get "${apt_opts[@]}" download "${missing[@]}")
fi

# --- summary ----------------------------------------------------------------------------------
carry_bytes="$(du -sb "$carry" | cut -f1)"
dist_bytes="$(du -sb "$repo_root/dist" 2>/dev/null | cut -f1 || echo 0)"
tree_bytes="$(cd "$repo_root" && git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)"
total=$((carry_bytes + ${dist_bytes:-0} + tree_bytes))
echo "prepare.sh: .carry/device $(human "$carry_bytes") (node.xz $(human "$(stat -c %s "$carry/node.xz")"), node_modules.tar.xz $(human "$(stat -c %s "$carry/node_modules.tar.xz")"), gl $(human "$(du -sb "$carry/gl" | cut -f1)"))"
echo "prepare.sh: dist $(human "${dist_bytes:-0}"), working tree $(human "$tree_bytes"); all that travels: $(human "$total") of the 64 MiB limit"
if ((total > 60 * 1024 * 1024)); then
  echo "prepare.sh: WARNING: within 4 MiB of the 64 MiB transfer limit" >&2
fi
if [[ ! -d "$repo_root/dist" ]]; then
  echo "prepare.sh: note: dist/ does not exist yet; run npx tsc -p tsconfig.json before the device call" >&2
fi
