// Reading an initial state from a file or buffer. Accepted: an rwkv-flow conversation file (CBOR),
// or a state-tuning checkpoint (.pth / safetensors with `blocks.{i}.att.time_state` [H, N, N], as
// produced by RWKV-PEFT state tuning and used by ai00). Anything else is refused with the reason.

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { decodeConversation } from './conversation-file';
import { StateFileError } from './errors';
import { loadCheckpoint } from './loader/checkpoint';
import { toF32 } from './loader/dtype';
import { stateLayout } from './state-layout';
import type { Checkpoint, ModelInfo } from './types';

export interface LoadedState {
  state: Float32Array;
  logits: Float32Array | null;
  source: string;
}

export async function readStateSource(source: string | Uint8Array, info: ModelInfo, stateSize: number): Promise<LoadedState> {
  const name = typeof source === 'string' ? source : 'buffer';
  let bytes: Uint8Array;
  if (typeof source === 'string') {
    try {
      bytes = await fs.promises.readFile(source);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new StateFileError(name, code === 'ENOENT' ? 'file not found' : `cannot read (${(e as Error).message})`);
    }
  } else if (source instanceof Uint8Array) {
    bytes = source;
  } else {
    throw new StateFileError('source', 'must be a file path or a Uint8Array');
  }
  if (bytes.length === 0) throw new StateFileError(name, 'is empty');
  if (looksLikeCborMap(bytes)) {
    const c = decodeConversation(bytes, name, info, stateSize);
    return { state: c.state, logits: c.logits, source: name };
  }
  const ck = await readCheckpointBytes(bytes, source);
  return { state: stateFromTimeState(ck, info, stateSize, name), logits: null, source: name };
}

/**
 * CBOR map header (major type 5). A .pth starts with "PK"; safetensors with a u64 header length
 * whose low byte may look like a map header, so its "{" at byte 8 rules it out.
 */
function looksLikeCborMap(bytes: Uint8Array): boolean {
  const safetensors = bytes.length >= 9 && bytes[8] === 0x7b && bytes[6] === 0 && bytes[7] === 0;
  return bytes[0] >= 0xa0 && bytes[0] <= 0xbf && !safetensors;
}

async function readCheckpointBytes(bytes: Uint8Array, source: string | Uint8Array): Promise<Checkpoint> {
  const where = typeof source === 'string' ? source : 'buffer';
  try {
    if (typeof source === 'string') return loadCheckpoint(source);
    // The checkpoint readers work on files; a buffer goes through a private temporary file.
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'rwkv-state-'));
    const file = path.join(dir, 'state.bin');
    try {
      await fs.promises.writeFile(file, bytes);
      return loadCheckpoint(file);
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  } catch (e) {
    throw new StateFileError(where, `neither a conversation file nor a readable state checkpoint (${(e as Error).message})`);
  }
}

/**
 * Zero state with each layer's WKV state replaced by the tuned `time_state`. State tuning stores
 * it as [H, key, value]; the runtime keeps [H, value, key], hence the transpose.
 */
function stateFromTimeState(ck: Checkpoint, info: ModelInfo, stateSize: number, name: string): Float32Array {
  if (info.version === 'v4') throw new StateFileError(name, 'state-tuning files are not supported for RWKV-4 models');
  const layout = stateLayout(info);
  const state = new Float32Array(stateSize);
  const H = info.nHead;
  const N = info.headSize;
  for (let l = 0; l < info.nLayer; l++) {
    const t = ck.tensors.get(`blocks.${l}.att.time_state`);
    if (!t) throw new StateFileError(name, `missing tensor blocks.${l}.att.time_state (model has ${info.nLayer} layers)`);
    const values = toF32(t);
    if (values.length !== H * N * N) {
      throw new StateFileError(name, `blocks.${l}.att.time_state has shape [${t.shape.join(', ')}], model needs [${H}, ${N}, ${N}]`);
    }
    const base = layout[l].att_kv.offset;
    for (let h = 0; h < H; h++) {
      for (let k = 0; k < N; k++) {
        for (let v = 0; v < N; v++) state[base + h * N * N + v * N + k] = values[h * N * N + k * N + v];
      }
    }
  }
  if (ck.tensors.has(`blocks.${info.nLayer}.att.time_state`)) {
    throw new StateFileError(name, `has more layers than the model (${info.nLayer})`);
  }
  for (const v of state) if (!Number.isFinite(v)) throw new StateFileError(name, 'time_state holds non-finite values');
  return state;
}
