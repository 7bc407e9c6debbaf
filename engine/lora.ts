// LoRA merged into the weights at load, in the layouts ai00 / web-rwkv and RWKV-LM-LoRA / RWKV-PEFT write:
// - for a matrix `P.weight` [out, in]: `P.weight.lora_A` [r, in] with `P.weight.lora_B` [out, r] (RWKV-LM-LoRA,
//   PEFT; also without the `.weight`), or `P.lora.1` [r, in] with `P.lora.0` [out, r] (web-rwkv's names);
//   the weight becomes W + (alpha / r) · B·A, r being the LoRA's rank, as those tools merge;
// - any other tensor named like one of the model's, with its shape (norms, token-shift mixes, … trained
//   alongside the LoRA): it replaces the model's tensor, as RWKV-LM-LoRA's merge and ai00's default blend do.
// Anything else in the file is refused by name, so a LoRA made for another model never half-applies.
//
// LoRA files are named by the operator's configuration (never by a request) and, like state files, must lie
// inside a folder: the model file's own folder, after symlinks; a file is at most as large as the model
// it adapts (plus headers), checked before it is read.

import * as fs from 'fs';
import * as path from 'path';
import { loadCheckpoint } from './loader/checkpoint';
import { toF32 } from './loader/dtype';
import { clip } from './loader/limits';
import { StateFolder, statePathProblem } from './state-folder';
import type { Checkpoint, RawTensor } from './types';

/** One LoRA as the configuration names it: a path relative to the model's folder, and its alpha. */
export interface LoraConfig {
  path: string;
  alpha: number;
}

/** A LoRA file resolved to its real path inside the model's folder. */
export interface LoraFile {
  file: string;
  alpha: number;
}

export const MAX_LORAS = 16;
/** Headers and index of a LoRA file beyond the bytes of the tensors it may replace. */
const LORA_HEADER_SLACK = 16 * 1024 * 1024;

/** Checks the config's `lora` field (shape only; files are looked at by resolveLoraFiles). */
export function checkLoraConfig(lora: unknown): void {
  if (lora === undefined || lora === null) return;
  if (!Array.isArray(lora)) throw new TypeError('engine config: lora must be a list of { path, alpha }');
  if (lora.length > MAX_LORAS) throw new RangeError(`engine config: lora lists ${lora.length} files, at most ${MAX_LORAS} are merged`);
  lora.forEach((l: unknown, i) => {
    if (typeof l !== 'object' || l === null) throw new TypeError(`engine config: lora[${i}] must be { path, alpha }`);
    const { path: p, alpha } = l as Partial<LoraConfig>;
    const problem = statePathProblem(p);
    if (problem) throw new TypeError(`engine config: lora[${i}].path ${problem} (relative to the model file's folder)`);
    if (typeof alpha !== 'number' || !Number.isFinite(alpha)) throw new TypeError(`engine config: lora[${i}].alpha must be a finite number, got ${JSON.stringify(alpha)}`);
  });
}

/** The real paths of the configured LoRA files, each inside the model file's folder and no larger than the model allows. */
export async function resolveLoraFiles(lora: readonly LoraConfig[] | undefined, modelFile: string): Promise<LoraFile[]> {
  if (!lora || lora.length === 0) return [];
  checkLoraConfig(lora);
  const folder = new StateFolder(path.dirname(modelFile));
  const bound = fs.statSync(modelFile).size + LORA_HEADER_SLACK;
  const out: LoraFile[] = [];
  for (const { path: rel, alpha } of lora) {
    const refused = () => new Error(`LoRA file ${JSON.stringify(rel)}: not found in the model's folder ${folder.dir}, or not allowed`);
    const real = await folder.locate(rel).catch(() => {
      throw refused();
    });
    const st = await fs.promises.stat(real).catch(() => null);
    if (!st || !st.isFile()) throw refused();
    if (st.size > bound) throw new Error(`LoRA file ${JSON.stringify(rel)} is ${st.size} bytes, more than the model it adapts (${bound} with headers)`);
    out.push({ file: real, alpha });
  }
  return out;
}

/** Reads each LoRA file and merges it into `ck`, in order. */
export function applyLoraFiles(ck: Checkpoint, files: readonly LoraFile[]): Checkpoint {
  let merged = ck;
  for (const { file, alpha } of files) {
    let lora: Checkpoint;
    try {
      lora = loadCheckpoint(file);
    } catch (e) {
      throw new Error(`LoRA file ${file}: ${(e as Error).message}`);
    }
    merged = mergeLora(merged, lora, alpha, path.basename(file));
  }
  return merged;
}

const PAIR = /^(.*?)(?:\.lora_(A|B)|\.lora\.([01]))$/;

/** `ck` with `lora` merged (alpha as in ai00's config); `ck` itself is left unchanged. */
export function mergeLora(ck: Checkpoint, lora: Checkpoint, alpha: number, where: string): Checkpoint {
  const tensors = new Map(ck.tensors);
  const pairs = new Map<string, { a?: RawTensor; b?: RawTensor }>();
  for (const [name, t] of lora.tensors) {
    const m = PAIR.exec(name);
    if (m) {
      // lora_A and lora.1 are the down projection [r, in]; lora_B and lora.0 the up projection [out, r].
      const target = m[1].endsWith('.weight') ? m[1] : `${m[1]}.weight`;
      const pair = pairs.get(target) ?? {};
      if (m[2] === 'A' || m[3] === '1') pair.a = t;
      else pair.b = t;
      pairs.set(target, pair);
      continue;
    }
    const base = ck.tensors.get(name);
    if (!base) throw new Error(`LoRA ${where}: tensor ${clip(name)} is not a tensor of the model`);
    if (!sameShape(base.shape, t.shape)) throw new Error(`LoRA ${where}: tensor ${name} has shape [${t.shape}], the model's is [${base.shape}]`);
    if (t.dtype === 'i32') throw new Error(`LoRA ${where}: tensor ${name} is not a float tensor`);
    tensors.set(name, { ...t, name });
  }
  for (const [target, { a, b }] of pairs) {
    const w = tensors.get(target);
    if (!w || w.shape.length !== 2) throw new Error(`LoRA ${where}: ${target} is not a weight matrix of the model`);
    if (!a || !b) throw new Error(`LoRA ${where}: ${target} has only one of its two LoRA matrices (A/lora.1 [rank, in] and B/lora.0 [out, rank])`);
    const [out, inp] = w.shape;
    const r = a.shape[0];
    if (a.shape.length !== 2 || b.shape.length !== 2 || a.shape[1] !== inp || b.shape[0] !== out || b.shape[1] !== r || !(r >= 1 && r <= Math.min(out, inp))) {
      throw new Error(`LoRA ${where}: ${target} [${w.shape}] cannot take A [${a.shape}] and B [${b.shape}] (need A [rank, ${inp}], B [${out}, rank])`);
    }
    tensors.set(target, addLowRank(w, toF32(b), toF32(a), r, alpha / r));
  }
  return { ...ck, tensors };
}

/** W + scale · B·A as a new f32 tensor: B [out, r], A [r, in]. */
function addLowRank(w: RawTensor, b: Float32Array, a: Float32Array, r: number, scale: number): RawTensor {
  const [out, inp] = w.shape;
  const merged = Float32Array.from(toF32(w));
  for (let o = 0; o < out; o++) {
    const row = o * inp;
    for (let k = 0; k < r; k++) {
      const f = scale * b[o * r + k];
      if (f === 0) continue;
      const ak = k * inp;
      for (let i = 0; i < inp; i++) merged[row + i] += f * a[ak + i];
    }
  }
  return { name: w.name, dtype: 'f32', shape: [out, inp], bytes: new Uint8Array(merged.buffer) };
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
