// The model picker behind the rwkv-model editor: lists the model files in the models folder — Node-RED's
// user directory's `models/` (or RWKV_FLOW_MODELS) — by name only, so a user picks one instead of typing a path.
// Only that folder is read, never a path the browser sends.

import * as fs from 'fs';
import * as path from 'path';

const MODEL_FILE = /\.(st|safetensors|pth)$/i;
const MAX_LISTED = 500;

export function modelsFolder(userDir: string | undefined): string | null {
  if (process.env.RWKV_FLOW_MODELS) return path.resolve(process.env.RWKV_FLOW_MODELS);
  return userDir ? path.join(userDir, 'models') : null;
}

export interface ModelFile {
  /** Path as the config node stores it: relative to the user directory when inside it, else absolute. */
  path: string;
  name: string;
  bytes: number;
}

export async function listModelFiles(userDir: string | undefined): Promise<{ folder: string | null; files: ModelFile[] }> {
  const folder = modelsFolder(userDir);
  if (!folder) return { folder, files: [] };
  let entries: fs.Dirent[];
  try {
    entries = await fs.promises.readdir(folder, { withFileTypes: true });
  } catch {
    return { folder, files: [] };
  }
  const files: ModelFile[] = [];
  for (const e of entries) {
    if (files.length >= MAX_LISTED) break;
    if (!MODEL_FILE.test(e.name)) continue;
    const full = path.join(folder, e.name);
    const stat = await fs.promises.stat(full).catch(() => null);
    if (!stat?.isFile()) continue;
    const relative = userDir ? path.relative(userDir, full) : '';
    files.push({ path: relative && !relative.startsWith('..') ? relative : full, name: e.name, bytes: stat.size });
  }
  files.sort((a, b) => a.name.localeCompare(b.name));
  return { folder, files };
}
