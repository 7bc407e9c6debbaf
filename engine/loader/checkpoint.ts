// Open a model file of either supported format. The format is chosen from the first bytes, not the
// extension: users rename files freely, and a wrong guess would otherwise surface as a confusing
// parse error deep inside the other format's reader.

import * as fs from 'fs';
import type { Checkpoint, RawTensor } from '../types';
import { withFile } from './file-reader';
import { readAll, type CheckpointReader } from './checkpoint-reader';
import { openPth } from './pth';
import { openSafetensors } from './safetensors';

export type CheckpointFormat = 'pth' | 'safetensors';

/** Sniff the format from the first 9 bytes; throws for missing, empty, or unrecognized files. */
export function detectCheckpointFormat(path: string): CheckpointFormat {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`model file not found: ${path}`);
    throw new Error(`cannot open model file ${path}: ${(e as Error).message}`);
  }
  if (stat.isDirectory()) throw new Error(`model path is a directory, not a file: ${path}`);
  if (stat.size === 0) throw new Error(`model file is empty: ${path}`);
  const head = withFile(path, (f) => f.read(0, Math.min(9, f.size), 'file signature'));
  // Local file header "PK\x03\x04" (or an empty archive's "PK\x05\x06").
  const pk = head.length >= 4 && head[0] === 0x50 && head[1] === 0x4b;
  if (pk && ((head[2] === 3 && head[3] === 4) || (head[2] === 5 && head[3] === 6))) return 'pth';
  // safetensors: u64 header length, then the JSON object's "{".
  if (head.length >= 9 && head[8] === 0x7b) return 'safetensors';
  if (stat.size < 9) throw new Error(`model file is too short (${stat.size} bytes; truncated?): ${path}`);
  // A pickle PROTO opcode at offset 0: torch.save's pre-1.6 format (a bare pickle stream).
  if (head[0] === 0x80 && head[1] >= 2 && head[1] <= 5) {
    throw new Error(`legacy (pre-1.6) PyTorch serialization is not supported; re-save it with a current torch.save: ${path}`);
  }
  throw new Error(`unrecognized model file format (expected a PyTorch .pth or a safetensors file): ${path}`);
}

/**
 * Open a .pth or safetensors checkpoint for streaming: the tensor index is validated now, tensor
 * bytes are read one at a time with reader.read(name). Close it when done.
 */
export function openCheckpoint(path: string): CheckpointReader {
  return detectCheckpointFormat(path) === 'pth' ? openPth(path) : openSafetensors(path);
}

/** Load every tensor of a .pth or safetensors checkpoint into memory. */
export function loadCheckpoint(path: string): Checkpoint {
  return readAll(openCheckpoint(path));
}

/** A checkpoint's tensor by name; a missing one is an error naming it. */
export function checkpointTensor(ck: Checkpoint, name: string): RawTensor {
  const t = ck.tensors.get(name);
  if (!t) throw new Error(`missing tensor ${name}`);
  return t;
}
