// The package as the hosts load it: `npm pack` content holds every file the n8n and Node-RED
// sections point at, everything those files require, and icons that are valid SVG and render.

import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Resvg } from '@resvg/resvg-js';
import { REPO_ROOT } from './paths';

interface PackageJson {
  keywords?: string[];
  n8n: { n8nNodesApiVersion: number; credentials: string[]; nodes: string[] };
  'node-red': { nodes: Record<string, string> };
}

const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as PackageJson;

function packedFiles(): Set<string> {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: REPO_ROOT, encoding: 'utf8' });
  const [report] = JSON.parse(out) as { files: { path: string }[] }[];
  return new Set(report.files.map((f) => f.path));
}

/** Every relative require() target of a compiled JS file, resolved to a package path. */
function relativeRequires(file: string): string[] {
  const src = fs.readFileSync(path.join(REPO_ROOT, file), 'utf8');
  return [...src.matchAll(/require\(["'](\.{1,2}\/[^"']+)["']\)/g)].map((m) => {
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1]));
    return target.endsWith('.js') || target.endsWith('.json') ? target : `${target}.js`;
  });
}

/** The file plus everything it reaches through relative requires (the package's own code). */
function closure(entry: string): Set<string> {
  const seen = new Set<string>();
  const todo = [entry];
  while (todo.length) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    if (!fs.existsSync(path.join(REPO_ROOT, f))) continue; // reported by the caller's membership check
    todo.push(...relativeRequires(f).map((t) => (fs.existsSync(path.join(REPO_ROOT, t)) ? t : t.replace(/\.js$/, '/index.js'))));
  }
  return seen;
}

function assertRenders(file: string): void {
  const svg = fs.readFileSync(path.join(REPO_ROOT, file), 'utf8');
  assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/, `${file}: root must be <svg> with the SVG namespace`);
  assert.match(svg, /viewBox="[\d. ]+"/, `${file}: needs a viewBox to scale`);
  const image = new Resvg(svg, { font: { loadSystemFonts: false } }).render(); // throws on malformed XML
  let opaque = 0;
  for (let i = 3; i < image.pixels.length; i += 4) if (image.pixels[i] > 0) opaque++;
  assert.ok(opaque > image.width * image.height * 0.05, `${file}: renders (almost) empty`);
}

describe('package layout for n8n and Node-RED', function () {
  this.timeout(60000);
  let packed: Set<string>;
  before(() => {
    packed = packedFiles();
  });

  it('is discoverable by both hosts', () => {
    assert.ok(pkg.keywords?.includes('n8n-community-node-package'));
    assert.ok(pkg.keywords?.includes('node-red'));
    assert.strictEqual(pkg.n8n.n8nNodesApiVersion, 1);
  });

  it('packs every n8n node and credential with the code they require', () => {
    for (const entry of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) {
      for (const f of closure(entry)) assert.ok(packed.has(f), `${f} (needed by ${entry}) is not in the package`);
    }
  });

  it('n8n node and credential files export the class n8n looks for', () => {
    for (const entry of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) {
      // n8n instantiates the export named like the file (RwkvGenerate.node.js → RwkvGenerate).
      const className = path.basename(entry).split('.')[0];
      const mod = require(path.join(REPO_ROOT, entry)) as Record<string, new () => { description?: unknown; name?: string }>;
      assert.strictEqual(typeof mod[className], 'function', `${entry} does not export ${className}`);
      const instance = new mod[className]();
      assert.ok(instance.description ?? instance.name, `${entry}: ${className} is neither a node nor a credential`);
    }
  });

  it('packs the n8n file icons where n8n resolves them, and they render', () => {
    for (const entry of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) {
      const className = path.basename(entry).split('.')[0];
      const instance = new (require(path.join(REPO_ROOT, entry))[className])();
      const icon = String((instance.description ?? instance).icon);
      assert.match(icon, /^file:/, `${entry} has no file icon`);
      const file = path.posix.normalize(path.posix.join(path.posix.dirname(entry), icon.slice(5)));
      assert.ok(packed.has(file), `${entry}: icon ${file} is not in the package`);
      assertRenders(file);
    }
  });

  it('packs every Node-RED node with its editor HTML, the code it requires and its icon', () => {
    for (const [type, entry] of Object.entries(pkg['node-red'].nodes)) {
      const html = entry.replace(/\.js$/, '.html');
      assert.ok(packed.has(entry), `${entry} is not in the package`);
      assert.ok(packed.has(html), `${html} is not in the package`);
      for (const f of closure(entry)) assert.ok(packed.has(f), `${f} (needed by ${entry}) is not in the package`);
      const editor = fs.readFileSync(path.join(REPO_ROOT, html), 'utf8');
      assert.ok(editor.includes(`registerType('${type}'`), `${html} does not register ${type}`);
      assert.ok(editor.includes(`data-template-name="${type}"`), `${html} has no edit dialog`);
      assert.ok(editor.includes(`data-help-name="${type}"`), `${html} has no help text`);
      const icon = /icon: '([^']+)'/.exec(editor)?.[1];
      if (type === 'rwkv-model') continue; // config nodes have no palette icon
      assert.ok(icon, `${html} names no icon`);
      // Node-RED looks for icons in an icons/ folder beside the node's .js file.
      const iconFile = path.posix.join(path.posix.dirname(entry), 'icons', icon);
      assert.ok(packed.has(iconFile), `${iconFile} is not in the package`);
      assertRenders(iconFile);
    }
  });

  it('every icon in the repository renders', () => {
    const dirs = ['icons', 'nodes/node-red/icons'];
    const files = dirs.flatMap((d) => fs.readdirSync(path.join(REPO_ROOT, d)).map((f) => `${d}/${f}`));
    assert.ok(files.length >= 9);
    for (const f of files) assertRenders(f);
  });

  it('ships the engine data and the examples, and no tests', () => {
    assert.ok(packed.has('vocab/rwkv_vocab_v20230424.txt'));
    assert.ok([...packed].some((f) => f.startsWith('shaders/') && f.endsWith('.wgsl')));
    assert.ok([...packed].some((f) => f.startsWith('examples/')));
    assert.ok(![...packed].some((f) => f.startsWith('dist/test/') || f.startsWith('test/')));
  });

  it('ships the CPU kernels: WebAssembly always, the native products where the build makes them (x86-64 Linux)', () => {
    assert.ok(packed.has('dist/engine/cpu/kernels.wasm') && packed.has('dist/engine/cpu/kernels-relaxed.wasm'));
    // Built from the repository at pack time, so an install with --ignore-scripts has it; absent, the x86-64 Linux
    // users the package is measured for would run the 2-4x slower WebAssembly products.
    if (process.platform === 'linux' && process.arch === 'x64') assert.ok(packed.has('dist/engine/cpu/native/products-linux-x64.node'));
    assert.ok(![...packed].some((f) => f.endsWith('.c')), 'no C sources in the package');
  });
});
