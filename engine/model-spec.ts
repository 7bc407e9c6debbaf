// What model a checkpoint holds: the RWKV version (from tensor names) and its hyper-parameters (from
// tensor shapes). For every version the engine knows (RWKV-4, RWKV-5.2, RWKV-6, RWKV-7 and its 7a / 7b
// variants) every tensor of the official layout is checked for presence, exact shape and a float dtype, so a
// bad file is rejected here with the offending tensor named instead of producing wrong logits later.
//
// The layer count is the number of contiguous layers blocks.0 … blocks.L-1; a tensor of a layer beyond
// them (blocks.1000000.…) is structurally impossible and refused by name before anything per-layer is
// built, and the expected tensors are checked one by one as they are generated, so a crafted index can
// never make describeModel allocate more than the checkpoint itself holds.

import type { Checkpoint, ModelInfo, RawTensor, RwkvVersion } from './types';
import type { CheckpointReader, TensorInfo } from './loader/checkpoint-reader';
import { toI32 } from './loader/dtype';
import { clip } from './loader/limits';

/** Names, dtypes and shapes are all describeModel needs (plus the bytes of `vocab_map`, if present). */
export type TensorIndex = { readonly tensors: ReadonlyMap<string, TensorInfo> };

export type ModelDims = Omit<ModelInfo, 'version' | 'vocabMap'>;

/** RWKV-7's variants: plain x070, 7a (DeepEmbed) and 7b (DeepEmbed + DEA attention). */
export type Rwkv7Variant = 'v7' | 'v7a' | 'v7b';

/** DeepEmbed's rank: the gate's 32-wide bottleneck, each token's table row viewed as 32×32 (fixed in the reference). */
export const DEEP_EMBED_RANK = 32;
/** Width of a DeepEmbed table row: DEEP_EMBED_RANK². */
export const DEEP_EMBED_ROW = DEEP_EMBED_RANK * DEEP_EMBED_RANK;
/** DEA's query/key width and its k/v cache width (fixed in the 7b reference). */
const DEA_QK = 256;
const DEA_CACHE = 32;

/** A layer's DeepEmbed tensors (RWKV-7a and 7b): s1 [C,32] and s2 [32,F] are [in, out], the tables [V,1024]. */
function* deepEmbedTensors(d: ModelDims, i: number): Generator<[string, number[]]> {
  const { nEmbd: C, vocabSize: V, ffnDim: F } = d;
  const f = `blocks.${i}.ffn.`;
  yield* [
    [`${f}s1`, [C, DEEP_EMBED_RANK]], [`${f}s2`, [DEEP_EMBED_RANK, F]], [`${f}s0`, [1, 1, F]],
    [`${f}s_emb.weight`, [V, DEEP_EMBED_ROW]], [`${f}s_emb_x.weight`, [DEEP_EMBED_ROW, C]],
  ] as [string, number[]][];
}

/** A layer's DEA attention tensors (RWKV-7b only). */
function* deaTensors(d: ModelDims, i: number): Generator<[string, number[]]> {
  const { nEmbd: C, vocabSize: V } = d;
  const q = `blocks.${i}.qkv.`;
  yield* [
    [`${q}qq.weight`, [DEA_QK, C]], [`${q}k1`, [C, DEA_CACHE]], [`${q}k2`, [DEA_CACHE, DEA_QK]],
    [`${q}k_emb.weight`, [V, DEA_QK]], [`${q}k_emb_x.weight`, [DEA_QK, C]],
    [`${q}v1`, [C, DEA_CACHE]], [`${q}v2`, [DEA_CACHE, C]], [`${q}v_emb.weight`, [V, C]], [`${q}v_emb_x.weight`, [C, C]],
    [`${q}x_q`, [1, 1, DEA_QK]], [`${q}x_k`, [1, 1, DEA_QK]], [`${q}x_v`, [1, 1, C]],
    [`${q}lnq.weight`, [DEA_QK]], [`${q}lnq.bias`, [DEA_QK]], [`${q}lnk.weight`, [DEA_QK]], [`${q}lnk.bias`, [DEA_QK]],
    [`${q}lnv.weight`, [C]], [`${q}lnv.bias`, [C]],
  ] as [string, number[]][];
}

/**
 * Tensor names and shapes of an RWKV-7 (x070) checkpoint, in the order official files store them; a 7a / 7b
 * variant adds each layer's DeepEmbed (and DEA) tensors after its channel mix.
 */
export function* rwkv7Tensors(d: ModelDims, variant: Rwkv7Variant = 'v7'): Generator<[string, number[]]> {
  const { nLayer: L, nEmbd: C, nHead: H, headSize: N, vocabSize: V, ffnDim: F } = d;
  const { w: Dw, a: Da, v: Dv, g: Dg } = d.loraDims;
  const vec = [1, 1, C];
  yield* [['emb.weight', [V, C]], ['blocks.0.ln0.weight', [C]], ['blocks.0.ln0.bias', [C]]] as [string, number[]][];
  for (let i = 0; i < L; i++) {
    const b = `blocks.${i}.`;
    const a = `${b}att.`;
    const out: [string, number[]][] = [];
    out.push([`${b}ln1.weight`, [C]], [`${b}ln1.bias`, [C]], [`${b}ln2.weight`, [C]], [`${b}ln2.bias`, [C]]);
    for (const x of ['x_r', 'x_w', 'x_k', 'x_v', 'x_a', 'x_g']) out.push([a + x, vec]);
    out.push([`${a}w0`, vec], [`${a}w1`, [C, Dw]], [`${a}w2`, [Dw, C]]);
    out.push([`${a}a0`, vec], [`${a}a1`, [C, Da]], [`${a}a2`, [Da, C]]);
    // Layer 0's value is the one the value residual mixes toward, so it has no v0/v1/v2.
    if (i > 0) out.push([`${a}v0`, vec], [`${a}v1`, [C, Dv]], [`${a}v2`, [Dv, C]]);
    out.push([`${a}g1`, [C, Dg]], [`${a}g2`, [Dg, C]]);
    out.push([`${a}k_k`, vec], [`${a}k_a`, vec], [`${a}r_k`, [H, N]]);
    for (const m of ['receptance', 'key', 'value', 'output']) out.push([`${a}${m}.weight`, [C, C]]);
    out.push([`${a}ln_x.weight`, [C]], [`${a}ln_x.bias`, [C]]);
    out.push([`${b}ffn.x_k`, vec], [`${b}ffn.key.weight`, [F, C]], [`${b}ffn.value.weight`, [C, F]]);
    yield* out;
    if (variant !== 'v7') yield* deepEmbedTensors(d, i);
    if (variant === 'v7b') yield* deaTensors(d, i);
  }
  yield* [['ln_out.weight', [C]], ['ln_out.bias', [C]], ['head.weight', [V, C]]] as [string, number[]][];
}

/** rwkv7Tensors as a list. */
export function rwkv7TensorShapes(d: ModelDims, variant: Rwkv7Variant = 'v7'): [string, number[]][] {
  return [...rwkv7Tensors(d, variant)];
}

/** The top-level tensors of every version before the layers, and after them. */
function* headTensors(d: ModelDims, end: boolean): Generator<[string, number[]]> {
  const { nEmbd: C, vocabSize: V } = d;
  if (!end) yield* [['emb.weight', [V, C]], ['blocks.0.ln0.weight', [C]], ['blocks.0.ln0.bias', [C]]] as [string, number[]][];
  else yield* [['ln_out.weight', [C]], ['ln_out.bias', [C]], ['head.weight', [V, C]]] as [string, number[]][];
}

/** A layer's norms and channel mix, alike in RWKV-4/5/6 but for the shift tensors' names. */
function* olderLayerCommon(d: ModelDims, i: number, mixNames: string[]): Generator<[string, number[]]> {
  const { nEmbd: C, ffnDim: F } = d;
  const b = `blocks.${i}.`;
  yield* [[`${b}ln1.weight`, [C]], [`${b}ln1.bias`, [C]], [`${b}ln2.weight`, [C]], [`${b}ln2.bias`, [C]]] as [string, number[]][];
  for (const m of mixNames) yield [`${b}ffn.${m}`, [1, 1, C]];
  yield* [[`${b}ffn.key.weight`, [F, C]], [`${b}ffn.receptance.weight`, [C, C]], [`${b}ffn.value.weight`, [C, F]]] as [string, number[]][];
}

/** Tensor names and shapes of an RWKV-6 (x060) checkpoint; `mixRank` is the width of each token-shift LoRA block. */
export function* rwkv6Tensors(d: ModelDims, mixRank: number): Generator<[string, number[]]> {
  const { nLayer: L, nEmbd: C, nHead: H, headSize: N } = d;
  const vec = [1, 1, C];
  yield* headTensors(d, false);
  for (let i = 0; i < L; i++) {
    const a = `blocks.${i}.att.`;
    yield* olderLayerCommon(d, i, ['time_maa_k', 'time_maa_r']);
    for (const m of ['x', 'w', 'k', 'v', 'r', 'g']) yield [`${a}time_maa_${m}`, vec];
    yield* [[`${a}time_maa_w1`, [C, 5 * mixRank]], [`${a}time_maa_w2`, [5, mixRank, C]]] as [string, number[]][];
    yield* [[`${a}time_decay`, vec], [`${a}time_decay_w1`, [C, d.loraDims.w]], [`${a}time_decay_w2`, [d.loraDims.w, C]]] as [string, number[]][];
    yield [`${a}time_faaaa`, [H, N]];
    for (const m of ['receptance', 'key', 'value', 'gate', 'output']) yield [`${a}${m}.weight`, [C, C]];
    yield* [[`${a}ln_x.weight`, [C]], [`${a}ln_x.bias`, [C]]] as [string, number[]][];
  }
  yield* headTensors(d, true);
}

/** Tensor names and shapes of an RWKV-5.2 checkpoint. */
export function* rwkv5Tensors(d: ModelDims): Generator<[string, number[]]> {
  const { nLayer: L, nEmbd: C, nHead: H, headSize: N } = d;
  yield* headTensors(d, false);
  for (let i = 0; i < L; i++) {
    const a = `blocks.${i}.att.`;
    yield* olderLayerCommon(d, i, ['time_mix_k', 'time_mix_r']);
    for (const m of ['k', 'v', 'r', 'g']) yield [`${a}time_mix_${m}`, [1, 1, C]];
    yield* [[`${a}time_decay`, [H, N]], [`${a}time_faaaa`, [H, N]]] as [string, number[]][];
    for (const m of ['receptance', 'key', 'value', 'gate', 'output']) yield [`${a}${m}.weight`, [C, C]];
    yield* [[`${a}ln_x.weight`, [C]], [`${a}ln_x.bias`, [C]]] as [string, number[]][];
  }
  yield* headTensors(d, true);
}

/**
 * Tensor names and shapes of an RWKV-4 checkpoint: per layer a static token shift (time_mix_k/v/r), a per-channel
 * decay and bonus (time_decay, time_first [C]) and no output norm or gate.
 */
export function* rwkv4Tensors(d: ModelDims): Generator<[string, number[]]> {
  const { nLayer: L, nEmbd: C } = d;
  yield* headTensors(d, false);
  for (let i = 0; i < L; i++) {
    const a = `blocks.${i}.att.`;
    yield* olderLayerCommon(d, i, ['time_mix_k', 'time_mix_r']);
    for (const m of ['k', 'v', 'r']) yield [`${a}time_mix_${m}`, [1, 1, C]];
    yield* [[`${a}time_decay`, [C]], [`${a}time_first`, [C]]] as [string, number[]][];
    for (const m of ['receptance', 'key', 'value', 'output']) yield [`${a}${m}.weight`, [C, C]];
  }
  yield* headTensors(d, true);
}

const NOT_RWKV = 'not an RWKV checkpoint (no emb.weight / blocks.N.* tensors)';
const BLOCK_NAME = /^blocks\.(\d+)\./;

function fmtShape(s: readonly number[]): string {
  return `[${s.map((d) => (Number.isFinite(d) ? String(d) : '?')).join(', ')}]`;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

function hasBlocks(ck: TensorIndex): boolean {
  for (const name of ck.tensors.keys()) if (BLOCK_NAME.test(name)) return true;
  return false;
}

/**
 * The number of contiguous layers blocks.0 … blocks.L-1. A tensor of any other layer is refused, naming it:
 * a layer index past a gap (or with leading zeros) cannot belong to the model, and trusting the largest
 * index would let one crafted name decide how much is allocated per layer.
 */
function countLayers(ck: TensorIndex): number {
  const present = new Set<number>();
  for (const name of ck.tensors.keys()) {
    const m = BLOCK_NAME.exec(name);
    if (m) present.add(Number(m[1]));
  }
  let n = 0;
  while (present.has(n)) n++;
  for (const name of ck.tensors.keys()) {
    const m = BLOCK_NAME.exec(name);
    if (!m || (Number(m[1]) < n && String(Number(m[1])) === m[1])) continue;
    const layers = n === 0 ? 'the checkpoint has no blocks.0 tensors' : `the model's layers are blocks.0 … blocks.${n - 1}`;
    throw new Error(`tensor ${clip(name)}: layer index ${clip(m[1], 30)} is not a layer of the model (${layers})`);
  }
  return n;
}

/** Which RWKV generation the tensor names belong to. Throws for a checkpoint that is not RWKV. */
export function detectVersion(ck: TensorIndex): RwkvVersion {
  if (!ck.tensors.has('emb.weight') || !hasBlocks(ck)) throw new Error(NOT_RWKV);
  const has = (suffix: string) => {
    for (const name of ck.tensors.keys()) if (BLOCK_NAME.test(name) && name.endsWith(suffix)) return true;
    return false;
  };
  if (has('.att.w0') || has('.att.a0') || has('.att.k_k')) {
    // The variants are told by layer 0's extra tensors (the README of the golden data: 7a DeepEmbed, 7b DEA).
    if (!ck.tensors.has('blocks.0.ffn.s_emb.weight')) return 'v7';
    return ck.tensors.has('blocks.0.qkv.qq.weight') ? 'v7b' : 'v7a';
  }
  if (has('.att.time_maa_x')) return 'v6';
  if (has('.att.ln_x.weight') && has('.att.time_faaaa')) return 'v5';
  if (has('.att.time_first')) return 'v4';
  throw new Error('unrecognized RWKV checkpoint: tensor names match none of RWKV v4, v5, v6, v7');
}

/** A shape axis of a tensor, or NaN when the tensor is absent or too small (reported later by name). */
function dim(ck: TensorIndex, name: string, axis: number): number {
  const t = ck.tensors.get(name);
  return t && axis < t.shape.length ? t.shape[axis] : NaN;
}

function need(ck: TensorIndex, name: string, rank: number): TensorInfo {
  const t = ck.tensors.get(name);
  if (!t) throw new Error(`missing tensor ${name}`);
  if (t.shape.length !== rank) throw new Error(`tensor ${name}: wrong shape: expected ${rank} dimensions, got ${fmtShape(t.shape)}`);
  return t;
}

function checkFloat(t: TensorInfo): void {
  if (t.dtype === 'i32') throw new Error(`tensor ${t.name}: wrong dtype: expected f32, f16 or bf16, got ${t.dtype}`);
}

/**
 * Every tensor of `layout(nLayer)` present with its exact shape and a float dtype (checked as generated: the
 * first missing tensor stops it, whatever the layer count), and no other tensor: anything else would be weights
 * the engine silently ignores (a variant it does not implement). Known names are the top-level ones, layer 0's
 * and every other layer's (all alike), by suffix; `tolerated` may accept more.
 */
function checkLayout(
  ck: TensorIndex,
  layout: (nLayer: number) => Iterable<[string, number[]]>,
  [short, label]: [string, string],
  nLayer: number,
  stateHeads: [number, number],
  tolerated: (name: string, t: TensorInfo) => boolean = () => false,
): void {
  for (const [name, shape] of layout(nLayer)) {
    const t = ck.tensors.get(name);
    if (!t) throw new Error(`missing tensor ${name} (${short}, ${nLayer} layers)`);
    if (!sameShape(t.shape, shape)) throw new Error(`tensor ${name}: wrong shape: expected ${fmtShape(shape)}, got ${fmtShape(t.shape)}`);
    checkFloat(t);
  }
  const top = new Set<string>();
  const layer0 = new Set<string>();
  const layerN = new Set<string>();
  for (const [name] of layout(2)) {
    const m = /^blocks\.([01])\.(.*)$/.exec(name);
    if (!m) top.add(name);
    else (m[1] === '0' ? layer0 : layerN).add(m[2]);
  }
  const known = (name: string) => {
    const m = /^blocks\.(\d+)\.(.*)$/.exec(name);
    if (!m) return top.has(name);
    return (m[1] === '0' ? layer0 : layerN).has(m[2]); // countLayers refused indices past the layers
  };
  for (const [name, t] of ck.tensors) {
    if (known(name) || name === 'vocab_map' || tolerated(name, t) || isTimeState(name, t, stateHeads)) continue;
    throw new Error(`unexpected tensor ${clip(name)} ${fmtShape(t.shape)}: not part of the ${label} layout`);
  }
}

const TIME_STATE = /^blocks\.\d+\.att\.time_state$/;

/**
 * A state-tuned model merged into its checkpoint carries each layer's tuned WKV state as
 * `blocks.N.att.time_state` [heads, head size, head size] (the layout of state-tuning files): accepted
 * with exactly that shape and a float dtype; the backend makes it the model's default initial state.
 */
function isTimeState(name: string, t: TensorInfo, [H, N]: [number, number]): boolean {
  if (!TIME_STATE.test(name)) return false;
  if (!sameShape(t.shape, [H, N, N])) throw new Error(`tensor ${name}: wrong shape: expected ${fmtShape([H, N, N])}, got ${fmtShape(t.shape)}`);
  checkFloat(t);
  return true;
}

/** Embedded time_state tensors are all-or-nothing: a model whose layers have them only in part is refused. */
function checkTimeStateLayers(ck: TensorIndex, nLayer: number): void {
  let count = 0;
  for (const name of ck.tensors.keys()) if (TIME_STATE.test(name)) count++;
  if (count === 0) return;
  for (let l = 0; l < nLayer; l++) {
    const name = `blocks.${l}.att.time_state`;
    if (!ck.tensors.has(name)) throw new Error(`missing tensor ${name}: the model embeds time_state in ${count} of its ${nLayer} layers, it needs all or none`);
  }
}

/** Whether the checkpoint embeds a tuned initial state (blocks.N.att.time_state, checked by describeModel). */
export function hasEmbeddedTimeState(ck: TensorIndex): boolean {
  return ck.tensors.has('blocks.0.att.time_state');
}

const V7_LABELS: Record<Rwkv7Variant, [string, string]> = {
  v7: ['RWKV-7', 'RWKV-7 (x070)'],
  v7a: ['RWKV-7a', 'RWKV-7a (x070 with DeepEmbed)'],
  v7b: ['RWKV-7b', 'RWKV-7b (x070 with DeepEmbed and DEA)'],
};

function describeV7(ck: TensorIndex, nLayer: number, variant: Rwkv7Variant = 'v7'): ModelDims {
  const [V, C] = need(ck, 'emb.weight', 2).shape;
  // r_k is [heads, head size]: the one tensor that tells the head split.
  const rk = ck.tensors.get('blocks.0.att.r_k');
  if (rk && (rk.shape.length !== 2 || rk.shape[0] * rk.shape[1] !== C)) {
    throw new Error(`tensor blocks.0.att.r_k: shape ${fmtShape(rk.shape)} does not split n_embd ${C} into [heads, head size]`);
  }
  const H = dim(ck, 'blocks.0.att.r_k', 0);
  const N = dim(ck, 'blocks.0.att.r_k', 1);
  const dims: ModelDims = {
    nLayer,
    nEmbd: C,
    nHead: H,
    headSize: N,
    vocabSize: V,
    ffnDim: dim(ck, 'blocks.0.ffn.key.weight', 0),
    loraDims: {
      w: dim(ck, 'blocks.0.att.w1', 1),
      a: dim(ck, 'blocks.0.att.a1', 1),
      v: nLayer > 1 ? dim(ck, 'blocks.1.att.v1', 1) : 0,
      g: dim(ck, 'blocks.0.att.g1', 1),
    },
  };
  // Some trainers keep unused v0/v1/v2 in layer 0; harmless when shaped right.
  checkLayout(ck, (n) => rwkv7Tensors({ ...dims, nLayer: n }, variant), V7_LABELS[variant], nLayer, [H, N], (name, t) => {
    const v = /^blocks\.0\.att\.(v0|v1|v2)$/.exec(name);
    const vShape = v && { v0: [1, 1, C], v1: [C, dims.loraDims.v], v2: [dims.loraDims.v, C] }[v[1] as 'v0' | 'v1' | 'v2'];
    return !!vShape && (nLayer === 1 || sameShape(t.shape, vShape));
  });
  return dims;
}

/** The head split of RWKV-5/6 from time_faaaa [heads, head size]. */
function headSplit(ck: TensorIndex, C: number): { nHead: number; headSize: number } {
  const f = need(ck, 'blocks.0.att.time_faaaa', 2);
  if (f.shape[0] * f.shape[1] !== C)
    throw new Error(`tensor blocks.0.att.time_faaaa: shape ${fmtShape(f.shape)} does not split n_embd ${C} into [heads, head size]`);
  return { nHead: f.shape[0], headSize: f.shape[1] };
}

function describeV6(ck: TensorIndex, nLayer: number): ModelDims {
  const [V, C] = need(ck, 'emb.weight', 2).shape;
  const mixRank = need(ck, 'blocks.0.att.time_maa_w1', 2).shape[1] / 5;
  if (!Number.isInteger(mixRank)) throw new Error(`tensor blocks.0.att.time_maa_w1: width ${mixRank * 5} is not 5 token-shift blocks`);
  const dims: ModelDims = {
    nLayer,
    nEmbd: C,
    ...headSplit(ck, C),
    vocabSize: V,
    ffnDim: dim(ck, 'blocks.0.ffn.key.weight', 0),
    loraDims: { w: dim(ck, 'blocks.0.att.time_decay_w1', 1), a: 0, v: 0, g: 0 },
  };
  checkLayout(ck, (n) => rwkv6Tensors({ ...dims, nLayer: n }, mixRank), ['RWKV-6', 'RWKV-6 (x060)'], nLayer, [dims.nHead, dims.headSize]);
  return dims;
}

function describeV5(ck: TensorIndex, nLayer: number): ModelDims {
  const [V, C] = need(ck, 'emb.weight', 2).shape;
  const dims: ModelDims = {
    nLayer,
    nEmbd: C,
    ...headSplit(ck, C),
    vocabSize: V,
    ffnDim: dim(ck, 'blocks.0.ffn.key.weight', 0),
    loraDims: { w: 0, a: 0, v: 0, g: 0 },
  };
  checkLayout(ck, (n) => rwkv5Tensors({ ...dims, nLayer: n }), ['RWKV-5.2', 'RWKV-5.2'], nLayer, [dims.nHead, dims.headSize]);
  return dims;
}

/** RWKV-4 keeps a scalar recurrent state per channel: described as C heads of size 1. */
function describeV4(ck: TensorIndex, nLayer: number): ModelDims {
  // Before the layout check, which would otherwise accept time_state as an embedded state of [C, 1, 1].
  if (hasEmbeddedTimeState(ck)) throw new Error('tensor blocks.0.att.time_state: embedded states are not supported for RWKV-4 models');
  const [V, C] = need(ck, 'emb.weight', 2).shape;
  const dims: ModelDims = {
    nLayer,
    nEmbd: C,
    nHead: C,
    headSize: 1,
    vocabSize: V,
    ffnDim: dim(ck, 'blocks.0.ffn.key.weight', 0),
    loraDims: { w: 0, a: 0, v: 0, g: 0 },
  };
  checkLayout(ck, (n) => rwkv4Tensors({ ...dims, nLayer: n }), ['RWKV-4', 'RWKV-4'], nLayer, [C, 1]);
  return dims;
}

/** Checked on the index entry, before a reader reads its bytes. */
function checkVocabMap(t: TensorInfo, vocabSize: number): void {
  if (t.dtype !== 'i32') throw new Error(`tensor vocab_map: wrong dtype: expected i32, got ${t.dtype}`);
  if (!sameShape(t.shape, [vocabSize])) throw new Error(`tensor vocab_map: wrong shape: expected [${vocabSize}], got ${fmtShape(t.shape)}`);
}

function readVocabMap(t: RawTensor, vocabSize: number): Int32Array {
  checkVocabMap(t, vocabSize);
  const map = Int32Array.from(toI32(t)); // own copy: ModelInfo outlives the checkpoint buffers
  const seen = new Uint8Array(65536);
  for (let i = 0; i < map.length; i++) {
    const id = map[i];
    if (id < 0 || id > 65535) throw new Error(`tensor vocab_map: entry ${i} is ${id}, outside the World vocabulary 0..65535`);
    if (seen[id]) throw new Error(`tensor vocab_map: token id ${id} appears more than once (again at row ${i})`);
    seen[id] = 1;
  }
  return map;
}

/**
 * Version and hyper-parameters of a checkpoint; throws naming the first bad tensor. Works on a loaded
 * Checkpoint or on an open CheckpointReader (then only `vocab_map`'s bytes are read).
 */
export function describeModel(ck: Checkpoint | CheckpointReader): ModelInfo {
  const version = detectVersion(ck);
  const nLayer = countLayers(ck);
  const describe = {
    v7: describeV7,
    v7a: (c: TensorIndex, n: number) => describeV7(c, n, 'v7a'),
    v7b: (c: TensorIndex, n: number) => describeV7(c, n, 'v7b'),
    v6: describeV6,
    v5: describeV5,
    v4: describeV4,
  }[version];
  const dims = describe(ck, nLayer);
  checkTimeStateLayers(ck, nLayer);
  const info: ModelInfo = { version, ...dims };
  const vm = ck.tensors.get('vocab_map');
  if (vm) checkVocabMap(vm, dims.vocabSize);
  if (vm) info.vocabMap = readVocabMap('bytes' in vm ? (vm as RawTensor) : (ck as CheckpointReader).read('vocab_map'), dims.vocabSize);
  return info;
}
