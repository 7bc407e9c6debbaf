// Uploads an RWKV-7 checkpoint to the GPU in the layout the kernels read: every matrix as [out, in] row-major
// (LoRA matrices transposed from their [in, out] storage and padded to a multiple of 32 so the kernels need no
// edge cases), weights as f16 or f32, small vectors always f32. With 'int8' or 'nf4' the large matrices
// (quant/quantised-matrices.ts: receptance, key, value, output, the channel mix's key and value, the head) are
// quantised at load (quant/gpu-matrix-group.ts); the LoRA matrices, the embedding and RWKV-7a's DeepEmbed
// tables and matrices stay f16; with `quantLayers` N > 0 the layers from N on keep f16 matrices too (the head
// stays quantised). Matrices used side by side (receptance, key, value; the four LoRA stages) share
// one buffer so one dispatch computes them all. RWKV-7a adds each layer's DeepEmbed table and gate vectors, and
// its s_emb_x matrices grouped a few layers to a buffer; RWKV-7b that and each layer's DEA matrices, tables and
// vectors (DeaLayer). The upload yields to the event loop between matrix
// groups and within long quantisations: a 1.5B model is seconds of host work.

import { normalizedEmbedding } from '../embedding-norm';
import type { Checkpoint, ModelInfo, RawTensor } from '../types';
import { f32ToF16, toF16Bits, toF32 } from '../loader/dtype';
import { checkpointTensor } from '../loader/checkpoint';
import { uploadBuffer } from '../gpu/kernel';
import { MAX_SEGS, SEGMENT_ALIGN } from './matmul';
import { DEEP_EMBED_ROW } from '../model-spec';
import { packQuantizedGroup } from '../quant/gpu-matrix-group';
import { gpuMatrixFormat } from '../quant/quantised-matrices';
import { yieldToEventLoop } from '../quant/weight-values';
import { blockable, uploadBlocks, type WeightLayout } from './weight-blocks';
import type { Precision, WeightStorage } from '../precision';
import { packDeaVectors } from './dea-vectors';

/** How weights are stored on the GPU: the model's precision (engine/precision.ts), and each matrix group's format. */
export type WeightPrecision = Precision;

/** The storage of the matrices a precision does not quantise (LoRA stages, embedding). */
export function floatFormat(precision: WeightPrecision): 'f16' | 'f32' {
  return precision === 'f32' ? 'f32' : 'f16';
}

/** One matrix inside a group buffer. */
export interface MatrixSegment {
  name: string;
  /** Output rows. */
  n: number;
  /** Input width (a multiple of 32). */
  k: number;
  /** Offset in the group buffer, in units of 8 elements. */
  wOff: number;
}

export interface MatrixGroup {
  buffer: GPUBuffer;
  segs: MatrixSegment[];
  /** How the buffer stores the weights: the weight include the kernels read it through (matmul.ts). */
  format: WeightPrecision;
  /** Quantised formats: the u32 word of the buffer where the scales start (quant/gpu-matrix-group.ts). */
  scaleWord?: number;
  /** How the buffer orders the weights (weight-blocks.ts); absent: the checkpoint's rows. */
  layout?: WeightLayout;
}

export interface LayerWeights {
  /** [weight; bias] of ln1 and ln2, [2, C] each. */
  ln1: GPUBuffer;
  ln2: GPUBuffer;
  /** x_r, x_w, x_k, x_v, x_a, x_g: [6, C]. */
  attMix: GPUBuffer;
  /** receptance, key, value. */
  rkv: MatrixGroup;
  /** First LoRA stages w1, a1, g1 and (after layer 0) v1. */
  lora1: MatrixGroup;
  /** Second LoRA stages w2, a2, g2 and (after layer 0) v2. */
  lora2: MatrixGroup;
  /**
   * receptance, key, value, w1, a1, g1 (, v1) in one buffer, of which `rkv` and `lora1` are views: a decode
   * step runs them as one product (engine/rwkv7/runtime.ts). Absent where the two differ in format (int8 and
   * nf4 layers keep f16 LoRAs; with quantLayers the later, f16 layers have it) or would not fit one binding.
   */
  rkvLora1?: MatrixGroup;
  o: MatrixGroup;
  /** w0, a0, v0, k_k, k_a: [5, C]. */
  prep: GPUBuffer;
  /** r_k, ln_x.weight, ln_x.bias: [3, C]. */
  post: GPUBuffer;
  ffnMix: GPUBuffer;
  ffnK: MatrixGroup;
  ffnV: MatrixGroup;
}

/** One layer's DeepEmbed gate (RWKV-7a; shaders/rwkv7a_gate.wgsl). */
export interface DeepEmbedLayer {
  /** s_emb.weight [V, 1024] in the weight precision; only the rows of the tokens run are read. */
  table: GPUBuffer;
  /** s1 [C, 32], s2 [32, F], s0 [F] as the checkpoint stores them ([in, out]), f32. */
  gate: GPUBuffer;
}

export interface DeepEmbedWeights {
  layers: DeepEmbedLayer[];
  /**
   * s_emb_x.weight [1024, C] of every layer, a few layers to a group (one dispatch): applied to each token's
   * normalized embedding they give the e·s_emb_xᵀ half of its SE row; `firstLayer` is the group's first layer.
   */
  sx: { group: MatrixGroup; firstLayer: number }[];
}

/**
 * One layer's RWKV-7b DEA attention (shaders/rwkv7b_dea_rows.wgsl, rwkv7b_dea_attend.wgsl). Every part stays in
 * the float format (f16, or f32 with f32 weights) whatever the precision: the matrices are small and the tables
 * are read a row per token, as the embedding is.
 */
export interface DeaLayer {
  /** qq [256, C], k1ᵀ [32, C], v1ᵀ [32, C]: q, kc, vc from the block input x. */
  proj: MatrixGroup;
  /** k2ᵀ [256, 32], v2ᵀ [C, 32]: kc·k2 and (with tanh) vc·v2. */
  expand: MatrixGroup;
  /** k_emb_x [256, C], v_emb_x [C, C]: e·k_emb_xᵀ and e·v_emb_xᵀ of a token's normalized embedding e. */
  embX: MatrixGroup;
  /** k_emb.weight [V, 256] then v_emb.weight [V, C] in one buffer (segs[1].wOff: where v_emb starts, units of 8). */
  tables: MatrixGroup;
  /** f32: x_q, x_k, x_v, lnq w, b, lnk w, b, lnv w, b (dea-vectors.ts). */
  vecs: GPUBuffer;
}

export interface ModelWeights {
  precision: WeightPrecision;
  /** Layers quantised from the first (0 = all; precision.ts WeightStorage). */
  quantLayers: number;
  /** RWKV-7a only. */
  deepEmbed?: DeepEmbedWeights;
  /** RWKV-7b only: per layer, the DEA attention. */
  dea?: DeaLayer[];
  emb: MatrixGroup;
  layers: LayerWeights[];
  lnOut: [GPUBuffer, GPUBuffer];
  head: MatrixGroup;
  /** Largest padded LoRA width, for sizing the LoRA scratch buffer. */
  maxLora: number;
  /** Bytes of all weights on the GPU. */
  bytes: number;
}

const STORAGE = 0x80; // GPUBufferUsage.STORAGE, spelled out so this file loads before Dawn's globals exist.

const pad32 = (n: number) => Math.ceil(n / 32) * 32;

function concat(parts: ArrayLike<number>[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The segments of matrices stored back to back in one group buffer (offsets in units of 8 elements). */
export function matrixSegments(mats: readonly { name: string; n: number; k: number }[]): MatrixSegment[] {
  const segs: MatrixSegment[] = [];
  let off = 0;
  for (const m of mats) {
    if (m.k % 32 !== 0) throw new Error(`${m.name}: input width ${m.k} is not a multiple of 32`);
    segs.push({ name: m.name, n: m.n, k: m.k, wOff: off / 8 });
    off += m.n * m.k;
  }
  return segs;
}

/**
 * A matrix on the host: f16 bits for 'f16', f32 values for 'f32'; for the quantised formats (quantised in
 * group()) the tensor's f16 bits when it is f16, else f32 values.
 */
type HostMatrix = { name: string; data: Uint16Array | Float32Array; n: number; k: number; format: WeightPrecision };

/** A tensor as the quantisers read it: an f16 tensor's bits without a copy, other dtypes as f32 values. */
export function quantiserInput(t: RawTensor): Uint16Array | Float32Array {
  return t.dtype === 'f16' ? toF16Bits(t) : toF32(t);
}

/** How the products' weights are laid out on the device (weight-blocks.ts weightLayoutFor). */
export interface WeightLayoutChoice {
  /** Blocks (either order): f16 groups read only by matrix products, every matrix whole 16×16 blocks, are stored so. */
  layout: WeightLayout;
}

export async function uploadRwkv7(
  device: GPUDevice,
  ck: Checkpoint,
  info: ModelInfo,
  storage: WeightStorage,
  layout: WeightLayoutChoice = { layout: 'rows' },
): Promise<ModelWeights> {
  const { precision } = storage;
  const C = info.nEmbd;
  let bytes = 0;
  const maxBinding = device.limits.maxStorageBufferBindingSize;
  // int8 and nf4 keep the embedding f16, and it is as large as the head: f16 sizes bound every buffer.
  const small = floatFormat(precision);
  for (const t of ck.tensors.values()) {
    const gpuBytes = (t.bytes.byteLength / (t.dtype === 'f32' ? 4 : 2)) * (small === 'f32' ? 4 : 2);
    if (gpuBytes > maxBinding)
      throw new Error(
        `tensor ${t.name} needs ${gpuBytes} bytes as ${precision} but this GPU binds at most ${maxBinding} bytes per buffer` +
          (precision === 'f32' ? '; try precision f16' : ''),
      );
  }
  const get = (name: string): RawTensor => checkpointTensor(ck, name);
  const vals = (name: string) => toF32(get(name));
  const f32 = (label: string, data: Float32Array): GPUBuffer => {
    bytes += data.byteLength;
    return uploadBuffer(device, label, data, STORAGE);
  };
  const stack = (label: string, parts: Float32Array[]) => {
    const out = new Float32Array(parts.length * C);
    parts.forEach((p, i) => out.set(p.subarray(0, C), i * C));
    return f32(label, out);
  };

  const inPrecision = (data: Float32Array) => (small === 'f16' ? f32ToF16(data) : data);
  /** A [out, in] matrix stored as such (torch Linear): in the model's precision, quantised if it is a large one. */
  const linear = (name: string): HostMatrix => {
    const t = get(name);
    const [n, k] = t.shape;
    const format = gpuMatrixFormat(name, storage);
    return { name, data: format === 'f16' ? toF16Bits(t) : format === 'f32' ? toF32(t) : quantiserInput(t), n, k, format };
  };
  /** A LoRA matrix stored [in, out]: transposed to [out, in], and the LoRA side padded to 32. */
  const lora = (name: string, loraIsOut: boolean): HostMatrix => {
    const t = get(name);
    const [inDim, outDim] = t.shape;
    const src = toF32(t);
    const n = loraIsOut ? pad32(outDim) : outDim;
    const k = loraIsOut ? inDim : pad32(inDim);
    const out = new Float32Array(n * k);
    for (let i = 0; i < inDim; i++) for (let o = 0; o < outDim; o++) out[o * k + i] = src[i * outDim + o];
    return { name, data: inPrecision(out), n, k, format: small };
  };
  /** One buffer of matrices; `products`: only matrix products read it (so it may be stored as blocks). */
  const group = async (label: string, mats: HostMatrix[], products = false): Promise<MatrixGroup> => {
    await yieldToEventLoop();
    const format = mats[0].format;
    if (mats.some((m) => m.format !== format)) throw new Error(`${label}: one group holds one storage format`);
    const segs = matrixSegments(mats);
    if (format === 'int8' || format === 'nf4') {
      const packed = await packQuantizedGroup(mats, format, SEGMENT_ALIGN);
      bytes += packed.modelBytes;
      return { buffer: uploadBuffer(device, label, packed.words, STORAGE), segs, format, scaleWord: packed.scaleWord };
    }
    // Kernels that load whole 16×16 tiles (mm_sgmat) read up to the segment alignment (64 rows) past a
    // matrix's last row; f16 buffers (the only ones it reads) get zero rows at the end so those reads stay inside.
    const last = mats[mats.length - 1];
    const padRows = format === 'f16' ? Math.ceil(last.n / SEGMENT_ALIGN) * SEGMENT_ALIGN - last.n : 0;
    const total = mats.reduce((s, m) => s + m.data.length, 0) + padRows * last.k;
    // The model's bytes, not the padding, whichever layout stores them.
    const modelBytes = mats.reduce((s, m) => s + m.data.byteLength, 0);
    const order = layout.layout;
    if (products && order !== 'rows' && format === 'f16' && mats.every(blockable)) {
      const buffer = await uploadBlocks(device, label, mats.map((m, i) => ({ data: m.data as Uint16Array, n: m.n, k: m.k, wOff: segs[i].wOff })), total, order);
      if (buffer) {
        bytes += modelBytes;
        return { buffer, segs, format, layout: order };
      }
      // The device ran out of memory reordering this group (it is held twice meanwhile): it keeps its rows.
    }
    let data: Uint16Array | Float32Array;
    if (mats.length === 1 && padRows === 0) data = mats[0].data;
    else {
      data = format === 'f16' ? new Uint16Array(total) : new Float32Array(total);
      let off = 0;
      for (const m of mats) {
        data.set(m.data, off);
        off += m.data.length;
      }
    }
    bytes += modelBytes;
    return { buffer: uploadBuffer(device, label, data, STORAGE), segs, format };
  };

  /**
   * The receptance/key/value group and the first LoRA stages: one buffer holding both (rkv and lora1 are views
   * of its segments) when they share a float format and fit one binding, else two groups.
   */
  const projections = async (prefix: string, rkvMats: HostMatrix[], l1: HostMatrix[]) => {
    const all = [...rkvMats, ...l1];
    const sameFloat = all.every((m) => m.format === l1[0].format) && (l1[0].format === 'f16' || l1[0].format === 'f32');
    const elementBytes = l1[0].format === 'f16' ? 2 : 4;
    const merged = all.reduce((n, m) => n + m.n * m.k, SEGMENT_ALIGN * l1[l1.length - 1].k) * elementBytes;
    if (!sameFloat || all.length > MAX_SEGS || merged > maxBinding) {
      return { rkv: await group(`${prefix}rkv`, rkvMats, true), lora1: await group(`${prefix}lora1`, l1, true), rkvLora1: undefined };
    }
    const both = await group(`${prefix}rkv+lora1`, all, true);
    const view = (from: number, to: number): MatrixGroup => ({ ...both, segs: both.segs.slice(from, to) });
    return { rkv: view(0, rkvMats.length), lora1: view(rkvMats.length, all.length), rkvLora1: both };
  };

  /** RWKV-7a: every layer's table and gate vectors, and the s_emb_x matrices grouped so each group binds whole. */
  async function uploadDeepEmbed(): Promise<DeepEmbedWeights> {
    const layers: DeepEmbedLayer[] = [];
    for (let l = 0; l < info.nLayer; l++) {
      const f = `blocks.${l}.ffn.`;
      const table = linear(`${f}s_emb.weight`); // [V, 1024]: the tensor check above bounds its size
      layers.push({
        table: (await group(`${f}s_emb.weight`, [table])).buffer,
        gate: f32(`${f}gate`, concat([vals(`${f}s1`), vals(`${f}s2`), vals(`${f}s0`)])),
      });
    }
    const matrixBytes = DEEP_EMBED_ROW * C * (precision === 'f32' ? 4 : 2);
    const perGroup = Math.max(1, Math.min(4, Math.floor(maxBinding / matrixBytes)));
    const sx: DeepEmbedWeights['sx'] = [];
    for (let l = 0; l < info.nLayer; l += perGroup) {
      const names = Array.from({ length: Math.min(perGroup, info.nLayer - l) }, (_, i) => `blocks.${l + i}.ffn.s_emb_x.weight`);
      sx.push({ group: await group(`s_emb_x ${l}..${l + names.length - 1}`, names.map(linear), true), firstLayer: l });
    }
    return { layers, sx };
  }

  /** A [out, in] matrix (torch Linear) in the float format, never quantised. */
  const plain = (name: string): HostMatrix => {
    const t = get(name);
    const [n, k] = t.shape;
    return { name, data: small === 'f16' ? toF16Bits(t) : toF32(t), n, k, format: small };
  };

  /** RWKV-7b: every layer's DEA matrices, tables and vectors (the math: ../shared/golden/README.md). */
  async function uploadDea(): Promise<DeaLayer[]> {
    const out: DeaLayer[] = [];
    for (let l = 0; l < info.nLayer; l++) {
      const q = `blocks.${l}.qkv.`;
      const vecs = packDeaVectors(l, C, vals);
      const tables = [plain(`${q}k_emb.weight`), plain(`${q}v_emb.weight`)];
      const tableBytes = tables.reduce((n, m) => n + m.data.byteLength, 0);
      if (tableBytes > maxBinding)
        throw new RangeError(`${q}k_emb and v_emb need ${tableBytes} bytes together, more than this GPU binds per buffer (${maxBinding})${precision === 'f32' ? '; try precision f16' : ''}`);
      out.push({
        proj: await group(`${q}proj`, [plain(`${q}qq.weight`), lora(`${q}k1`, true), lora(`${q}v1`, true)], true),
        expand: await group(`${q}expand`, [lora(`${q}k2`, false), lora(`${q}v2`, false)], true),
        embX: await group(`${q}emb_x`, [plain(`${q}k_emb_x.weight`), plain(`${q}v_emb_x.weight`)], true),
        tables: await group(`${q}tables`, tables),
        vecs: f32(`${q}vecs`, vecs),
      });
    }
    return out;
  }

  // The reference normalizes the embedding with blocks.0.ln0 once at load time; do the same.
  const embT = get('emb.weight');
  const [V] = embT.shape;
  const emb = normalizedEmbedding(embT, vals('blocks.0.ln0.weight'), vals('blocks.0.ln0.bias'));

  let maxLora = 32;
  const layers: LayerWeights[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    const first = l === 0;
    const l1 = [lora(`${a}w1`, true), lora(`${a}a1`, true), lora(`${a}g1`, true)];
    const l2 = [lora(`${a}w2`, false), lora(`${a}a2`, false), lora(`${a}g2`, false)];
    if (!first) {
      l1.push(lora(`${a}v1`, true));
      l2.push(lora(`${a}v2`, false));
    }
    maxLora = Math.max(maxLora, ...l1.map((m) => m.n));
    const rkvMats = [linear(`${a}receptance.weight`), linear(`${a}key.weight`), linear(`${a}value.weight`)];
    const { rkv, lora1, rkvLora1 } = await projections(`${a}`, rkvMats, l1);
    layers.push({
      ln1: stack(`${p}ln1`, [vals(`${p}ln1.weight`), vals(`${p}ln1.bias`)]),
      ln2: stack(`${p}ln2`, [vals(`${p}ln2.weight`), vals(`${p}ln2.bias`)]),
      attMix: stack(`${a}mix`, ['x_r', 'x_w', 'x_k', 'x_v', 'x_a', 'x_g'].map((n) => vals(a + n))),
      rkv,
      lora1,
      rkvLora1,
      lora2: await group(`${a}lora2`, l2, true),
      o: await group(`${a}output.weight`, [linear(`${a}output.weight`)], true),
      prep: stack(`${a}prep`, [
        vals(`${a}w0`),
        vals(`${a}a0`),
        first ? new Float32Array(C) : vals(`${a}v0`),
        vals(`${a}k_k`),
        vals(`${a}k_a`),
      ]),
      post: stack(`${a}post`, [vals(`${a}r_k`), vals(`${a}ln_x.weight`), vals(`${a}ln_x.bias`)]),
      ffnMix: stack(`${p}ffn.mix`, [vals(`${p}ffn.x_k`)]),
      ffnK: await group(`${p}ffn.key.weight`, [linear(`${p}ffn.key.weight`)], true),
      ffnV: await group(`${p}ffn.value.weight`, [linear(`${p}ffn.value.weight`)], true),
    });
  }
  // RWKV-7b is 7a plus the DEA attention: both.
  const deepEmbed = info.version === 'v7a' || info.version === 'v7b' ? await uploadDeepEmbed() : undefined;
  const dea = info.version === 'v7b' ? await uploadDea() : undefined;
  const embGroup = await group('emb.weight', [{ name: 'emb.weight', data: inPrecision(emb), n: V, k: C, format: small }]);
  const head = await group('head.weight', [linear('head.weight')], true);
  return {
    precision,
    quantLayers: storage.quantLayers,
    deepEmbed,
    dea,
    emb: embGroup,
    layers,
    lnOut: [f32('ln_out.weight', Float32Array.from(vals('ln_out.weight'))), f32('ln_out.bias', Float32Array.from(vals('ln_out.bias')))],
    head,
    maxLora,
    bytes,
  };
}
