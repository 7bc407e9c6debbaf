// node-llama-cpp (llama.cpp) on the same weights as the CPU backend, for `npm run bench -- --sections cpu`:
// finds the install (NLC_DIR), makes the GGUF files with ../shared/cpu-baseline/rwkv7_to_gguf.py when Python's
// `gguf` is there (cached by the checkpoint's content hash, so a changed model is converted again), and runs
// ../shared/cpu-baseline/nlc-bench.mjs in a fresh process (README there). Measurement tooling, not engine code.

import { spawnSync } from 'child_process';
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { writeSafetensors } from '../engine/loader/safetensors';
import { toF32 } from '../engine/loader/dtype';
import type { Checkpoint, RawTensor } from '../engine/types';

export type GgufType = 'f16' | 'q8_0';

export interface NlcSetup {
  /** Where node-llama-cpp is installed (node_modules/node-llama-cpp inside). */
  dir: string;
  /** ../shared/cpu-baseline: the converter, the prompt maker and the bench script. */
  tools: string;
  /** Where converted models and written checkpoints are kept between runs. */
  cache: string;
  /** Whether `python3 -c "import gguf, numpy"` works, so GGUF files can be made here. */
  canConvert: boolean;
}

/** The comparison's setup, or the reason it cannot run (then the bench prints it and measures ours alone). */
export function nlcSetup(): NlcSetup | string {
  const dir = process.env.NLC_DIR;
  if (!dir) return 'NLC_DIR is not set (the folder where node-llama-cpp is installed)';
  if (!fs.existsSync(path.join(dir, 'node_modules', 'node-llama-cpp', 'dist', 'index.js')))
    return `node-llama-cpp is not installed in NLC_DIR=${dir} (npm i -E node-llama-cpp@3.21.1 there)`;
  const shared = process.env.RWKV_SHARED ?? path.resolve(__dirname, '../../../shared');
  const tools = path.join(shared, 'cpu-baseline');
  for (const f of ['nlc-bench.mjs', 'make-prompts.js', 'rwkv7_to_gguf.py'])
    if (!fs.existsSync(path.join(tools, f))) return `${path.join(tools, f)} is missing (RWKV_SHARED points at the shared folder)`;
  const cache = process.env.NLC_GGUF_DIR ?? path.join(os.tmpdir(), 'rwkv-flow-nlc-gguf');
  fs.mkdirSync(cache, { recursive: true });
  const py = spawnSync('python3', ['-c', 'import gguf, numpy'], { encoding: 'utf8' });
  return { dir, tools, cache, canConvert: py.status === 0 };
}

function fileHash(file: string): string {
  const h = createHash('sha256');
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 22);
    for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) h.update(buf.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex').slice(0, 16);
}

/**
 * The model as GGUF of `type`: `given` (an NLC_GGUF_* variable) when set, else a cached conversion, made now
 * when missing. Reduced-vocabulary checkpoints are scattered to the 65,536-row World vocabulary (the
 * converter's --expand-vocab), so llama.cpp's head then has 65,536 rows. null when it cannot be made.
 */
export function ggufFor(setup: NlcSetup, checkpointFile: string, type: GgufType, given?: string): string | null {
  if (given) {
    if (!fs.existsSync(given)) throw new Error(`GGUF ${given} (from the environment) does not exist`);
    return given;
  }
  if (!setup.canConvert) return null;
  const out = path.join(setup.cache, `${path.basename(checkpointFile).replace(/\.\w+$/, '')}-${fileHash(checkpointFile)}-${type}.gguf`);
  if (fs.existsSync(out)) return out;
  const vocab = path.resolve(__dirname, '../../vocab/rwkv_vocab_v20230424.txt');
  const tmp = `${out}.${process.pid}.tmp`;
  const r = spawnSync('python3', [path.join(setup.tools, 'rwkv7_to_gguf.py'), checkpointFile, tmp, '--outtype', type, '--vocab', vocab, '--expand-vocab'], { encoding: 'utf8' });
  if (r.status !== 0) {
    fs.rmSync(tmp, { force: true });
    throw new Error(`rwkv7_to_gguf.py failed on ${checkpointFile}: ${r.stderr.slice(-2000)}`);
  }
  fs.renameSync(tmp, out);
  return out;
}

/** Writes an in-memory checkpoint (the random 0.1B model) to the cache, so the converter can read it. */
export function checkpointFile(setup: NlcSetup, ck: Checkpoint, name: string): string {
  const file = path.join(setup.cache, `${name}.st`);
  writeSafetensors(file, ck.tensors, ck.metadata);
  return file;
}

/**
 * The reduced-vocabulary checkpoint with its embedding and head scattered to the 65,536-row World vocabulary
 * (unmapped rows zero), as the GGUF conversion does: our backend then computes the same 65,536-row head as
 * llama.cpp, so decode compares like with like.
 */
export function worldVocabCheckpoint(ck: Checkpoint): Checkpoint {
  const map = ck.tensors.get('vocab_map');
  if (!map) return ck;
  const ids = new Int32Array(map.bytes.buffer.slice(map.bytes.byteOffset, map.bytes.byteOffset + map.bytes.byteLength));
  const tensors = new Map<string, RawTensor>();
  for (const [name, t] of ck.tensors) {
    if (name === 'vocab_map') continue;
    if (name !== 'emb.weight' && name !== 'head.weight') {
      tensors.set(name, t);
      continue;
    }
    const C = t.shape[1];
    const src = toF32(t);
    const out = new Float32Array(65536 * C);
    ids.forEach((id, row) => out.set(src.subarray(row * C, (row + 1) * C), id * C));
    tensors.set(name, { name, dtype: 'f32', shape: [65536, C], bytes: new Uint8Array(out.buffer) });
  }
  return { ...ck, tensors };
}

export interface NlcResult {
  decode_b1: number;
  prefill_512: number;
  runs: { decode_b1: number[]; prefill_512: number[] };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The 16- and 512-token prompts for a checkpoint (World ids of README text), made once per process. */
const promptFiles = new Map<string, string>();

function promptsFor(setup: NlcSetup, checkpoint: string): string {
  let file = promptFiles.get(checkpoint);
  if (file) return file;
  const root = path.resolve(__dirname, '../..');
  const p = spawnSync(process.execPath, [path.join(setup.tools, 'make-prompts.js'), root, checkpoint, path.join(root, 'README.md')], { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`make-prompts failed: ${p.stderr}`);
  file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-cpu-bench-')), 'prompts.json');
  fs.writeFileSync(file, p.stdout);
  promptFiles.set(checkpoint, file);
  return file;
}

/** One fresh node-llama-cpp process on `gguf` with exactly `threads` threads: `reps` decodes and prefills (none: decodeOnly). */
export function runNlc(setup: NlcSetup, gguf: string, checkpoint: string, threads: number, reps: number, decodeOnly = false): NlcResult {
  const prompts = promptsFor(setup, checkpoint);
  const r = spawnSync(process.execPath, [path.join(setup.tools, 'nlc-bench.mjs'), gguf, prompts, String(reps + 1), String(threads)], {
    encoding: 'utf8',
    env: { ...process.env, NLC_DIR: setup.dir, ...(decodeOnly ? { NO_PREFILL: '1' } : {}) },
  });
  if (r.status !== 0) throw new Error(`nlc-bench failed: ${r.stderr}`);
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  // The first repetition is the cold one (as ours, which runs a warm-up first).
  const decode = j.gen.slice(1).map((g: { decode_tok_s: number }) => +g.decode_tok_s.toFixed(1));
  const prefill = j.prefill.slice(1).map((g: { tok_s: number }) => +g.tok_s.toFixed(1));
  return { decode_b1: median(decode), prefill_512: median(prefill), runs: { decode_b1: decode, prefill_512: prefill } };
}
