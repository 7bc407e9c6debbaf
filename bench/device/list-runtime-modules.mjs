// Lists the files of the runtime node_modules tree that the device machine needs, one path a
// line, relative to the repository root. Run by prepare.sh; plain JS so it works before `tsc`.
//
// Roots: the package names given as arguments, else the root package.json's "dependencies".
// The closure follows each package's dependencies and optionalDependencies the way Node
// resolves them (nearest node_modules first). Optional packages that are not installed are
// skipped; a missing required one is an error naming it.
//
// The `webgpu` package is trimmed to what runs on linux-x64: its index.js, package.json and
// dist/linux-x64/dawn.node. The other platforms' binaries (~110 MB) and its build scripts
// never run there.

import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const rootManifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const roots = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(rootManifest.dependencies ?? {});

/** Directory of package `name` as Node would find it from inside `fromDir`, or null. */
function resolvePackageDir(name, fromDir) {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dir === repoRoot) return null;
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

const packageDirs = new Set();
const pending = roots.map((name) => ({ name, fromDir: repoRoot, optional: false, requiredBy: 'package.json' }));
while (pending.length > 0) {
  const { name, fromDir, optional, requiredBy } = pending.pop();
  const dir = resolvePackageDir(name, fromDir);
  if (dir === null) {
    if (optional) continue;
    throw new Error(`runtime dependency "${name}" (needed by ${requiredBy}) is not installed under node_modules`);
  }
  if (packageDirs.has(dir)) continue;
  packageDirs.add(dir);
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  for (const dep of Object.keys(manifest.dependencies ?? {})) {
    pending.push({ name: dep, fromDir: dir, optional: false, requiredBy: manifest.name });
  }
  for (const dep of Object.keys(manifest.optionalDependencies ?? {})) {
    pending.push({ name: dep, fromDir: dir, optional: true, requiredBy: manifest.name });
  }
}

function* walkFiles(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      // Nested node_modules hold their own packages; they are listed only if reached above.
      if (entry.name === 'node_modules') continue;
      yield* walkFiles(path);
    } else if (entry.isFile() || entry.isSymbolicLink()) {
      yield path;
    }
  }
}

const files = [];
for (const dir of [...packageDirs].sort()) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  if (manifest.name === 'webgpu') {
    const keep = ['package.json', 'index.js', 'LICENSE.md', join('dist', 'linux-x64', 'dawn.node')];
    for (const file of keep) {
      const path = join(dir, file);
      if (!existsSync(path) && file !== 'LICENSE.md') {
        throw new Error(`webgpu package lacks ${file}: reinstall it (flock /tmp/npm.lock npm install)`);
      }
      if (existsSync(path)) files.push(path);
    }
    continue;
  }
  for (const path of walkFiles(dir)) files.push(path);
}

for (const path of files) {
  statSync(path); // fail loudly on a dangling link rather than producing a broken archive
  process.stdout.write(relative(repoRoot, path) + '\n');
}
