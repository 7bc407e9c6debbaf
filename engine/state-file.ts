// Reading an initial state from a file or buffer. Accepted: an rwkv-flow conversation file (CBOR),
// or a state-tuning checkpoint (.pth / safetensors with `blocks.{i}.att.time_state` [H, N, N], as
// produced by RWKV-PEFT state tuning and used by ai00). Anything else is refused with the reason.
// Files come only from the confined state folder (state-folder.ts), bounded by what a state of the
// loaded model can be; bytes given directly get the same bound.

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { conversationBytesBound, decodeConversation } from './conversation-file';
import { StateFileError } from './errors';
import { loadCheckpoint } from './loader/checkpoint';
import { toF32 } from './loader/dtype';
import type { StateFolder } from './state-folder';
import { stateLayout } from './state-layout';
import type { Checkpoint, ModelInfo } from './types';
import { asShape, type StateShape } from './state-shape';

export interface LoadedState {
  state: Float32Array;
  logits: Float32Array | null;
  source: string;
}

/**
 * Largest state source this model can have, checked before anything is read: a conversation file
 * (conversationBytesBound; a growing state's rows up to the context limit) or a state-tuning checkpoint, whose time_state tensors hold at most
 * nLayer * H * N * N values (f32, doubled for f64 or padding) plus the zip / pickle / JSON headers.
 */
export function stateSourceBound(info: ModelInfo, shape: StateShape | number): number {
  const checkpoint = 2 * 4 * info.nLayer * info.nHead * info.headSize * info.headSize + 1024 * 1024;
  return Math.max(conversationBytesBound(info, shape), checkpoint);
}

/** A state from a file in the state folder (a relative path) or from bytes given directly. */
export async function readStateSource(source: string | Uint8Array, folder: StateFolder, info: ModelInfo, shape: StateShape | number): Promise<LoadedState> {
  const bound = stateSourceBound(info, shape);
  let bytes: Uint8Array;
  if (typeof source === 'string') {
    bytes = await folder.read(source, bound);
  } else if (source instanceof Uint8Array) {
    if (source.length > bound) throw new StateFileError('buffer', `is ${source.length} bytes, more than a state of this model can be (${bound})`);
    bytes = source;
  } else {
    throw new StateFileError('source', 'must be a file path or a Uint8Array');
  }
  const name = typeof source === 'string' ? source : 'buffer';
  if (bytes.length === 0) throw new StateFileError(name, 'is empty');
  if (looksLikeCborMap(bytes)) {
    const c = await decodeConversation(bytes, name, info, shape);
    return { state: c.state, logits: c.logits, source: name };
  }
  const ck = await readCheckpointBytes(bytes, name);
  return { state: stateFromTimeState(ck, info, asShape(shape).stateSize, name), logits: null, source: name };
}

/**
 * CBOR map header (major type 5). A .pth starts with "PK"; safetensors with a u64 header length
 * whose low byte may look like a map header, so its "{" at byte 8 rules it out.
 */
function looksLikeCborMap(bytes: Uint8Array): boolean {
  const safetensors = bytes.length >= 9 && bytes[8] === 0x7b && bytes[6] === 0 && bytes[7] === 0;
  return bytes[0] >= 0xa0 && bytes[0] <= 0xbf && !safetensors;
}

async function readCheckpointBytes(bytes: Uint8Array, where: string): Promise<Checkpoint> {
  try {
    // The checkpoint readers work on files; the bytes (already read, bounded, from the state folder or
    // given directly) go through a private temporary file, so the readers never open a request's path.
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
export function stateFromTimeState(ck: Checkpoint, info: ModelInfo, stateSize: number, name: string): Float32Array {
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
