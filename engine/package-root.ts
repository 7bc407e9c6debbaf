import * as fs from 'fs';
import * as path from 'path';

let root: string | null = null;

/** The package's root folder, found from either engine/ (ts-node) or dist/engine/ (compiled). */
export function packageRoot(): string {
  if (root) return root;
  let dir = __dirname;
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).name === 'rwkv-flow') return (root = dir);
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`rwkv-flow package root not found above ${__dirname}`);
    dir = up;
  }
}
