#!/usr/bin/env bash
# Builds a git revision's compiled engine and benchmarks into .carry/ab/<name>/ (package.json, dist/engine,
# dist/bench, shaders), so one device call can run the revision beside the working tree, processes alternating:
#   bash bench/device/ab-tree.sh HEAD~1 old        (here; then carry ".carry/ab" too)
#   bash bench/device/remote.sh node .carry/ab/old/dist/bench/run.js --sections engine ...   (there)
# Engine figures move ±10% between processes of one machine session, so A/B/A in one call is the comparison
# that holds (bench/RESULTS.md); figures of two machine sessions are not compared.
set -euo pipefail
rev="${1:?give a revision}"
name="${2:?give a name for .carry/ab/<name>}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$repo_root/.carry/ab/$name"
work="$(mktemp -d)"
trap 'git -C "$repo_root" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$repo_root" worktree add --detach "$work/tree" "$rev" >/dev/null
ln -s "$repo_root/node_modules" "$work/tree/node_modules"
(cd "$work/tree" && npx tsc -p tsconfig.json)
rm -rf "$out"
mkdir -p "$out/dist"
cp "$work/tree/package.json" "$out/"
cp -r "$work/tree/shaders" "$out/"
cp -r "$work/tree/dist/engine" "$work/tree/dist/bench" "$out/dist/"
echo "ab-tree.sh: $(git -C "$repo_root" rev-parse --short "$rev") in .carry/ab/$name ($(du -sh "$out" | cut -f1))"
