#!/usr/bin/env bash
# Runs ON the device machine (through the `device` tool's `run`), in the repository root there:
# sets up what prepare.sh carried in .carry/device, then runs its arguments as a command.
#   bash bench/device/remote.sh node dist/bench/device/device-facts.js
# Sets up:
#   - the Vulkan loader and GL dispatch libraries (dpkg -x of .carry/device/gl/*.deb into /,
#     only when the image has no libvulkan.so.1), then ldconfig;
#   - node in /tmp/rwkv-flow-device/bin, put first on PATH;
#   - node_modules: unpacked to /tmp/rwkv-flow-device/node_modules and linked as ./node_modules,
#     so both require() and import() (ESM ignores NODE_PATH) find the packages;
#   - VK_DRIVER_FILES pointing at NVIDIA's Vulkan ICD.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
carry=.carry/device
runtime=/tmp/rwkv-flow-device

if (($# == 0)); then
  echo "remote.sh: give the command to run, e.g. bash bench/device/remote.sh node dist/bench/run.js" >&2
  exit 2
fi
for part in node.xz node_modules.tar.xz gl; do
  if [[ ! -e "$carry/$part" ]]; then
    echo "remote.sh: $carry/$part is missing: run bench/device/prepare.sh here and name \".carry/device\" in the run call's carry" >&2
    exit 2
  fi
done
if [[ ! -d dist ]]; then
  echo "remote.sh: warning: no dist/ here; compiled JS travels only when the run call's carry names \"dist\"" >&2
fi

# xz is in the image as far as seen; python3's lzma is the fallback so a leaner image still works.
unxz_to_stdout() {
  if command -v xz >/dev/null; then
    xz -dc "$1"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"
  fi
}

# --- Vulkan loader ----------------------------------------------------------------------------
if ! ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
  # Only these small loader packages go into /; README of the device tool warns that others can break it.
  for f in "$carry"/gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if [[ -z "${VK_DRIVER_FILES:-}" ]]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [[ -f "$icd" ]]; then export VK_DRIVER_FILES="$icd"; break; fi
  done
fi
if [[ -z "${VK_DRIVER_FILES:-}" ]]; then
  echo "remote.sh: warning: no nvidia_icd.json found; Dawn will see only the CPU or no adapter" >&2
fi

# --- node + node_modules ----------------------------------------------------------------------
mkdir -p "$runtime/bin"
stamp_of() { stat -c '%s %Y' "$1"; }
if [[ ! -x "$runtime/bin/node" || "$(cat "$runtime/node.stamp" 2>/dev/null)" != "$(stamp_of "$carry/node.xz")" ]]; then
  unxz_to_stdout "$carry/node.xz" >"$runtime/bin/node.partial"
  chmod +x "$runtime/bin/node.partial"
  mv "$runtime/bin/node.partial" "$runtime/bin/node"
  stamp_of "$carry/node.xz" >"$runtime/node.stamp"
fi
export PATH="$runtime/bin:$PATH"

if [[ ! -d "$runtime/node_modules" || "$(cat "$runtime/node_modules.stamp" 2>/dev/null)" != "$(stamp_of "$carry/node_modules.tar.xz")" ]]; then
  rm -rf "$runtime/node_modules"
  mkdir -p "$runtime/node_modules"
  unxz_to_stdout "$carry/node_modules.tar.xz" | tar -C "$runtime/node_modules" -xf -
  stamp_of "$carry/node_modules.tar.xz" >"$runtime/node_modules.stamp"
fi
if [[ -e node_modules && ! -L node_modules ]]; then
  echo "remote.sh: warning: a real ./node_modules travelled here; using it instead of the carried one" >&2
else
  ln -sfn "$runtime/node_modules" node_modules
fi

echo "remote.sh: node $(node --version), VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}, GPU: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'nvidia-smi not found')" >&2
exec "$@"
