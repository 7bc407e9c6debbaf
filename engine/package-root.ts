import * as fs from 'fs';
import * as path from 'path';

/** The npm name: n8n's community-node installer only takes packages named n8n-nodes-*; Node-RED finds the
 * package by its "node-red" section, whatever its name. */
export const PACKAGE_NAME = 'n8n-nodes-rwkv-flow';

let root: string | null = null;

/** The package's root folder, found from either engine/ (ts-node) or dist/engine/ (compiled). */
export function packageRoot(): string {
  if (root) return root;
  let dir = __dirname;
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).name === PACKAGE_NAME) return (root = dir);
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`${PACKAGE_NAME} package root not found above ${__dirname}`);
    dir = up;
  }
}
