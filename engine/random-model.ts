// Random RWKV-7 checkpoints with the official x070 names and shapes, for tests and benchmarks at real
// model sizes (0.1B-1.5B) without downloading weights. Values follow the spirit of the official init
// (mix coefficients in [0,1], decay logits w0 in [-5,-1], unit layer norms, ~1/sqrt(fan_in) matrices,
// smaller output projections) so activations stay finite through many layers; unlike the official
// init, nothing is zero, so every code path of an engine contributes to the logits.
//
// Speed: a 1.5B model is 1.5e9 elements, too many for even a one-lookup-per-element PRNG loop in JS
// (~5 s on a slow CI core). So each distinct distribution gets a pool of up to 1M random values,
// already in the output format (f16 bits or f32), drawn by table lookup from a xorshift32 stream;
// tensors are then filled with 64K-element runs copied from random pool offsets (a memcpy). Values
// repeat only as whole runs at random places, which is irrelevant for tests and benchmarks.

import type { Checkpoint, ModelInfo, RawTensor } from './types';
import { f32ToF16Bits, numElements } from './loader/dtype';
import { writeSafetensors } from './loader/safetensors';
import { rwkv7TensorShapes, type ModelDims } from './model-spec';

export interface RandomRwkv7Options {
  nLayer: number;
  nEmbd: number;
  /** Default 64 (all official RWKV-7 models). */
  headSize?: number;
  vocabSize: number;
  /** Default 4 * nEmbd, as in the official x070 channel mix. */
  ffnDim?: number;
  /** Default: officialLoraDims(nEmbd). */
  loraDims?: Partial<ModelInfo['loraDims']>;
  /** Default 1. */
  seed?: number;
  /** Default 'f16'. */
  dtype?: 'f16' | 'f32';
  /** 'v7a' adds RWKV-7a's DeepEmbed tensors, 'v7b' those and the DEA attention's (default 'v7'). */
  variant?: 'v7' | 'v7a' | 'v7b';
}

/**
 * LoRA ranks of the released RWKV-7 models (x070 train code: max(32, round(k * C^p / 32) * 32) with
 * decay 1.8·C^0.5, a 1.8·C^0.5, value 1.3·C^0.5, gate 0.6·C^0.8). Gives 64/64/32/128 for C=768,
 * 96/96/64/256 for C=2048.
 */
export function officialLoraDims(nEmbd: number): ModelInfo['loraDims'] {
  const r = (x: number) => Math.max(32, Math.round(x / 32) * 32);
  const sq = Math.sqrt(nEmbd);
  return { w: r(1.8 * sq), a: r(1.8 * sq), v: r(1.3 * sq), g: r(0.6 * nEmbd ** 0.8) };
}

type Init =
  | { kind: 'const'; value: number }
  | { kind: 'uniform'; lo: number; hi: number }
  | { kind: 'normal'; std: number };

/** Initial value distribution per tensor, keyed on the name's last components. */
function initFor(name: string, shape: number[]): Init {
  const fanIn = shape[shape.length - 1];
  const leaf = name.replace(/^blocks\.\d+\./, '');
  switch (leaf) {
    case 'emb.weight': return { kind: 'normal', std: 1 }; // scale irrelevant: ln0 normalizes it
    case 'head.weight': return { kind: 'normal', std: 1 / Math.sqrt(fanIn) };
    case 'ln0.weight': case 'ln1.weight': case 'ln2.weight': case 'ln_out.weight': case 'att.ln_x.weight':
      return { kind: 'const', value: 1 };
    case 'ln0.bias': case 'ln1.bias': case 'ln2.bias': case 'ln_out.bias': case 'att.ln_x.bias':
      return { kind: 'const', value: 0 };
    case 'att.x_r': case 'att.x_w': case 'att.x_k': case 'att.x_v': case 'att.x_a': case 'att.x_g': case 'ffn.x_k':
      return { kind: 'uniform', lo: 0, hi: 1 };
    case 'att.w0': return { kind: 'uniform', lo: -5, hi: -1 };
    case 'att.a0': return { kind: 'uniform', lo: -0.5, hi: 0.3 };
    case 'att.v0': return { kind: 'uniform', lo: 0.5, hi: 1.0 };
    case 'att.k_k': return { kind: 'uniform', lo: 0.6, hi: 0.9 };
    case 'att.k_a': return { kind: 'uniform', lo: 0.9, hi: 1.1 };
    case 'att.r_k': return { kind: 'uniform', lo: -0.2, hi: 0.1 };
    // LoRA down-projections [C, D] see layer-normed inputs; up-projections [D, C] are kept small.
    case 'att.w1': case 'att.a1': case 'att.v1': case 'att.g1': return { kind: 'normal', std: 1 / Math.sqrt(shape[0]) };
    case 'att.w2': case 'att.a2': case 'att.v2': case 'att.g2': return { kind: 'normal', std: 0.2 / Math.sqrt(shape[0]) };
    case 'att.receptance.weight': case 'att.key.weight': case 'att.value.weight': case 'ffn.key.weight':
      return { kind: 'normal', std: 1 / Math.sqrt(fanIn) };
    // Residual-branch outputs: half scale so the residual stream grows slowly over depth.
    case 'att.output.weight': case 'ffn.value.weight': return { kind: 'normal', std: 0.5 / Math.sqrt(fanIn) };
    // RWKV-7a DeepEmbed: the gate h·(ss·s2 + s0) stays near s0, around 1.
    case 'ffn.s1': case 'ffn.s_emb_x.weight': return { kind: 'normal', std: 1 / Math.sqrt(name.endsWith('s1') ? shape[0] : fanIn) };
    case 'ffn.s_emb.weight': return { kind: 'normal', std: 1 };
    case 'ffn.s2': return { kind: 'normal', std: 0.2 / Math.sqrt(shape[0]) };
    case 'ffn.s0': return { kind: 'uniform', lo: 0.5, hi: 1.5 };
    // RWKV-7b DEA: projections of the raw residual stream, tables around 1, shifts in [0, 1], LN near identity.
    case 'qkv.qq.weight': case 'qkv.k_emb_x.weight': case 'qkv.v_emb_x.weight': return { kind: 'normal', std: 1 / Math.sqrt(fanIn) };
    case 'qkv.k1': case 'qkv.v1': case 'qkv.k2': case 'qkv.v2': return { kind: 'normal', std: 1 / Math.sqrt(shape[0]) };
    case 'qkv.k_emb.weight': case 'qkv.v_emb.weight': return { kind: 'normal', std: 1 };
    case 'qkv.x_q': case 'qkv.x_k': case 'qkv.x_v': return { kind: 'uniform', lo: 0, hi: 1 };
    case 'qkv.lnq.weight': case 'qkv.lnk.weight': case 'qkv.lnv.weight': return { kind: 'const', value: 1 };
    case 'qkv.lnq.bias': case 'qkv.lnk.bias': case 'qkv.lnv.bias': return { kind: 'const', value: 0 };
    default: throw new Error(`random-model: no init rule for ${name}`);
  }
}

/** xorshift32: fast, seedable, good enough to decorrelate table indices. */
class XorShift32 {
  private s: number;
  constructor(seed: number) {
    this.s = (seed ^ 0x9e3779b9) >>> 0 || 0x12345678;
    for (let i = 0; i < 8; i++) this.next();
  }
  next(): number {
    let s = this.s;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (this.s = s >>> 0);
  }
  /** Uniform in (0, 1). */
  float(): number {
    return (this.next() + 0.5) / 4294967296;
  }
  get state(): number {
    return this.s;
  }
  set state(v: number) {
    this.s = v >>> 0 || 0x12345678;
  }
}

const TABLE_SIZE = 65536;

/** 64K values of the distribution, as f32 numbers. */
function tableValues(init: Exclude<Init, { kind: 'const' }>, rng: XorShift32): Float64Array {
  const t = new Float64Array(TABLE_SIZE);
  if (init.kind === 'uniform') {
    for (let i = 0; i < TABLE_SIZE; i++) t[i] = init.lo + ((init.hi - init.lo) * (i + 0.5)) / TABLE_SIZE;
  } else {
    for (let i = 0; i < TABLE_SIZE; i += 2) {
      // Box-Muller: two independent normals per pair of uniforms.
      const r = Math.sqrt(-2 * Math.log(rng.float())) * init.std;
      const th = 2 * Math.PI * rng.float();
      t[i] = r * Math.cos(th);
      t[i + 1] = r * Math.sin(th);
    }
  }
  return t;
}

/** out[i] = table[16 random bits]: two elements per xorshift step. */
function fillFromTable<T extends Uint16Array | Float32Array>(out: T, table: T, rng: XorShift32): void {
  let s = rng.state;
  const n = out.length;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = table[s & 0xffff];
    out[i + 1] = table[s >>> 16];
  }
  rng.state = s;
  if (i < n) out[i] = table[rng.next() & 0xffff];
}

const POOL_MAX = 1 << 20;
const RUN = 1 << 16;

/** Fill `out` with runs copied from random offsets of `pool` (pool.length >= min(out.length, RUN)). */
function fillFromPool<T extends Uint16Array | Float32Array>(out: T, pool: T, rng: XorShift32): void {
  for (let off = 0; off < out.length; off += RUN) {
    const len = Math.min(RUN, out.length - off);
    const start = rng.next() % (pool.length - len + 1);
    out.set(pool.subarray(start, start + len), off);
  }
}

/** A typed array without the zero-fill of `new` (every element is overwritten right away). */
function allocate(dtype: 'f16' | 'f32', n: number): Uint16Array | Float32Array {
  const bytes = Buffer.allocUnsafeSlow(n * (dtype === 'f16' ? 2 : 4));
  return dtype === 'f16' ? new Uint16Array(bytes.buffer, bytes.byteOffset, n) : new Float32Array(bytes.buffer, bytes.byteOffset, n);
}

/** Dimensions a random model with these options will have. */
export function randomRwkv7Dims(opts: RandomRwkv7Options): ModelDims {
  const headSize = opts.headSize ?? 64;
  const { nLayer, nEmbd, vocabSize } = opts;
  for (const [k, v] of Object.entries({ nLayer, nEmbd, headSize, vocabSize })) {
    if (!Number.isSafeInteger(v) || v <= 0) throw new Error(`randomRwkv7Checkpoint: ${k} must be a positive integer, got ${v}`);
  }
  if (nEmbd % headSize !== 0) throw new Error(`randomRwkv7Checkpoint: nEmbd ${nEmbd} is not a multiple of headSize ${headSize}`);
  const loraDims = { ...officialLoraDims(nEmbd), ...opts.loraDims };
  return { nLayer, nEmbd, nHead: nEmbd / headSize, headSize, vocabSize, ffnDim: opts.ffnDim ?? 4 * nEmbd, loraDims };
}

/** An in-memory RWKV-7 checkpoint with random weights; same options and seed → same bytes. */
export function randomRwkv7Checkpoint(opts: RandomRwkv7Options): Checkpoint {
  const dims = randomRwkv7Dims(opts);
  const dtype = opts.dtype ?? 'f16';
  const seed = opts.seed ?? 1;
  const rng = new XorShift32(seed);
  const shapes = rwkv7TensorShapes(dims, opts.variant ?? 'v7');
  const inits = shapes.map(([name, shape]) => initFor(name, shape));

  // Pool size per distribution: all that its tensors need, capped (small models stay exactly random).
  const need = new Map<string, number>();
  for (let i = 0; i < shapes.length; i++) {
    const key = JSON.stringify(inits[i]);
    need.set(key, Math.min(POOL_MAX, (need.get(key) ?? 0) + numElements(shapes[i][1])));
  }
  const pools = new Map<string, Uint16Array | Float32Array>();
  const poolFor = (init: Exclude<Init, { kind: 'const' }>) => {
    const key = JSON.stringify(init);
    let pool = pools.get(key);
    if (!pool) {
      const values = tableValues(init, rng);
      const table = dtype === 'f16' ? Uint16Array.from(values, f32ToF16Bits) : Float32Array.from(values);
      pool = allocate(dtype, Math.max(need.get(key)!, 1));
      fillFromTable(pool, table, rng);
      pools.set(key, pool);
    }
    return pool;
  };

  const tensors = new Map<string, RawTensor>();
  for (let i = 0; i < shapes.length; i++) {
    const [name, shape] = shapes[i];
    const init = inits[i];
    const data = allocate(dtype, numElements(shape));
    if (init.kind === 'const') {
      if (data instanceof Uint16Array) data.fill(f32ToF16Bits(init.value));
      else data.fill(init.value);
    } else {
      fillFromPool(data, poolFor(init), rng);
    }
    tensors.set(name, { name, dtype, shape, bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) });
  }
  return {
    format: 'memory',
    tensors,
    metadata: { generator: 'rwkv-flow random-model', seed: String(seed), version: 'x070' },
  };
}

/** Generate a random RWKV-7 model and write it as safetensors; returns its dimensions. */
export function writeRandomRwkv7Safetensors(path: string, opts: RandomRwkv7Options): ModelDims {
  const ck = randomRwkv7Checkpoint(opts);
  writeSafetensors(path, ck.tensors, ck.metadata);
  return randomRwkv7Dims(opts);
}
