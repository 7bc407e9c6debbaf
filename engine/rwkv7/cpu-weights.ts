// Lays out an RWKV-7 checkpoint for the CPU kernels (engine/cpu/kernels/kernels.ts), in the precision the GPU
// path uses (f16 by default, f32 on request) or int8 with per-row scales: every matrix in panels of 8 output
// rows ([k][8] per panel, so the kernels multiply 8 rows against one broadcast input), the embedding table
// row-major after the load-time ln0 normalization, small vectors f32. int8 quantises every matrix of the
// layers `quantLayers` covers (all by default; the later layers' matrices stay f16) and the head; each matrix
// carries its kind, so one product call can mix them. Two phases: `planRwkv7Cpu` reserves addresses in the
// arena and keeps the host copies (yielding to the event loop between matrices); `CpuWeightPlan.write` copies
// them into the memory once it exists.

import { normalizedEmbedding } from '../embedding-norm';
import type { Checkpoint, ModelInfo, RawTensor } from '../types';
import { f32ToF16, toF16Bits, toF32 } from '../loader/dtype';
import type { Arena } from '../cpu/arena';
import { int8Panels } from '../cpu/int8-quant';
import { inQuantisedLayers } from '../quant/quantised-matrices';
import { yieldToEventLoop, type WeightValues } from '../quant/weight-values';
import { quantiserInput } from './weights';
import type { WeightStorage } from '../precision';
import { MAX_PAGES } from '../cpu/wasm-kernels';
import { DEEP_EMBED_ROW } from '../model-spec';

export type CpuPrecision = 'f16' | 'f32' | 'int8';

/** The kernels' matrix kinds (kernels.ts `matmul`). */
export const MATRIX_KIND: Record<CpuPrecision, number> = { f16: 0, f32: 1, int8: 2 };

/** One matrix: its panels' address, output rows n (padded to whole panels with zero rows), input width k. */
export interface CpuMatrix {
  w: number;
  /** Its storage (MATRIX_KIND): 0 f16, 1 f32, 2 int8. */
  kind: number;
  n: number;
  k: number;
  panels: number;
}

/** Addresses (bytes) of one layer's weights; see weights.ts for the meaning of each group. */
export interface CpuLayer {
  /** [weight; bias], 2C floats each. */
  ln1: number;
  ln2: number;
  /** x_r, x_w, x_k, x_v, x_a, x_g: 6C floats. */
  attMix: number;
  r: CpuMatrix;
  k: CpuMatrix;
  v: CpuMatrix;
  o: CpuMatrix;
  /** LoRA first stages (from C to the rank) and second stages (back to C); v only after layer 0. */
  w1: CpuMatrix;
  a1: CpuMatrix;
  g1: CpuMatrix;
  v1: CpuMatrix | null;
  w2: CpuMatrix;
  a2: CpuMatrix;
  g2: CpuMatrix;
  v2: CpuMatrix | null;
  /** w0, a0, v0, k_k, k_a: 5C floats. */
  prep: number;
  /** r_k, ln_x.weight, ln_x.bias: 3C floats. */
  post: number;
  /** ffn x_k: C floats. */
  ffnMix: number;
  ffnK: CpuMatrix;
  ffnV: CpuMatrix;
}

/** RWKV-7a's DeepEmbed gate of one layer (kernels.ts `deepEmbedGate`). */
export interface CpuDeepEmbedLayer {
  /** s_emb.weight [V, 1024], f16 (f32 when `wide`), row-major: only the rows of the tokens run are read. */
  table: number;
  /** s1 [C, 32], s2 [32, F], s0 [F] as the checkpoint stores them ([in, out]), f32. */
  gate: number;
  /** s_emb_x.weight [1024, C]: applied to a token's normalized embedding, the e·s_emb_xᵀ half of its SE row. */
  sx: CpuMatrix;
}

/** Everything the forward pass needs to find the weights; plain data, so it can be posted to a worker. */
export interface CpuWeights {
  precision: CpuPrecision;
  /** RWKV-7a only, one entry per layer. */
  deepEmbed?: CpuDeepEmbedLayer[];
  /** 1 when the embedding table is f32 (the kernels' `embed` `wide`). */
  wide: number;
  /** Whether any matrix is int8 (the products' scratch is sized for it then). */
  hasInt8: boolean;
  /** [V, C] embedding table, f16 (also for int8) or f32. */
  emb: number;
  layers: CpuLayer[];
  lnOut: [number, number];
  head: CpuMatrix;
  /** Largest LoRA rank, for sizing scratch. */
  maxLora: number;
  /** Bytes of all weights. */
  bytes: number;
}

export interface CpuWeightPlan {
  weights: CpuWeights;
  /** Copies every host array to its address; call once the memory exists. */
  write(memory: WebAssembly.Memory): void;
}

/** Matrix source: element (row o, input i) at src[o * k + i], or at src[i * n + o] when stored [in, out]. */
interface Source {
  name: string;
  /** int8 (quantised here): the quantisers' input (f16 bits or f32 values); else already in the matrix kind. */
  data: WeightValues;
  kind: number;
  n: number;
  k: number;
  transposed: boolean;
}

/** An [in, out] matrix's [out, in] rows, same element type. */
function transposeToRows(data: WeightValues, n: number, k: number): WeightValues {
  const rows = data instanceof Uint16Array ? new Uint16Array(n * k) : new Float32Array(n * k);
  for (let r = 0; r < n; r++) for (let i = 0; i < k; i++) rows[r * k + i] = data[i * n + r];
  return rows;
}

export async function planRwkv7Cpu(arena: Arena, ck: Checkpoint, info: ModelInfo, storage: WeightStorage & { precision: CpuPrecision }): Promise<CpuWeightPlan> {
  const { precision } = storage;
  const C = info.nEmbd;
  const wide = precision === 'f32';
  if (info.version === 'v7a') {
    // A real 7a model's tables dwarf its other weights (12 layers of a 65536-token vocabulary: 1.5 GiB as f16);
    // refused before any host copy is made when they alone cannot fit the kernels' memory.
    const bytesPer = wide ? 4 : 2;
    const tableBytes = info.nLayer * info.vocabSize * DEEP_EMBED_ROW * bytesPer;
    if (tableBytes > MAX_PAGES * 65536)
      throw new RangeError(
        `the RWKV-7a DeepEmbed tables need ${tableBytes} bytes (${info.nLayer} layers × ${info.vocabSize} tokens × ${DEEP_EMBED_ROW} × ${bytesPer}), ` +
          `more than the CPU backend's 4 GiB of WebAssembly memory${wide ? '; try precision f16' : ''}`,
      );
  }
  const writes: { at: number; data: Float32Array | Uint16Array | Uint8Array }[] = [];
  let bytes = 0;
  const get = (name: string): RawTensor => {
    const t = ck.tensors.get(name);
    if (!t) throw new Error(`missing tensor ${name}`);
    return t;
  };
  const vals = (name: string) => toF32(get(name));
  const place = (data: Float32Array | Uint16Array | Uint8Array): number => {
    const at = arena.alloc(data.byteLength);
    writes.push({ at, data });
    bytes += data.byteLength;
    return at;
  };
  const stack = (parts: Float32Array[]) => {
    const out = new Float32Array(parts.length * C);
    parts.forEach((p, i) => out.set(p.subarray(0, C), i * C));
    return place(out);
  };
  /** A matrix's storage: int8 in the layers the storage quantises (and the head), else the float precision. */
  const kindOf = (name: string): number => (precision === 'int8' && inQuantisedLayers(name, storage) ? MATRIX_KIND.int8 : MATRIX_KIND[wide ? 'f32' : 'f16']);
  const source = (name: string, t: RawTensor, transposed: boolean): Source => {
    const kind = kindOf(name);
    const data = kind === MATRIX_KIND.int8 ? quantiserInput(t) : kind === MATRIX_KIND.f32 ? toF32(t) : toF16Bits(t);
    return transposed ? { name, data, kind, n: t.shape[1], k: t.shape[0], transposed } : { name, data, kind, n: t.shape[0], k: t.shape[1], transposed };
  };
  const linear = (name: string): Source => source(name, get(name), false);
  const lora = (name: string): Source => source(name, get(name), true);
  let hasInt8 = false;
  const matrix = async (s: Source): Promise<CpuMatrix> => {
    await yieldToEventLoop();
    const { data, n, k, transposed, kind } = s;
    const panels = Math.ceil(n / 8);
    if (kind === MATRIX_KIND.int8) {
      hasInt8 = true;
      // LoRA matrices are stored [in, out]: rows of the output side first (they are small).
      return { w: place(await int8Panels(transposed ? transposeToRows(data, n, k) : data, n, k)), kind, n, k, panels };
    }
    const out = kind === MATRIX_KIND.f32 ? new Float32Array(panels * 8 * k) : new Uint16Array(panels * 8 * k);
    for (let o = 0; o < n; o++) {
      const base = (o >> 3) * 8 * k + (o & 7);
      if (transposed) for (let i = 0; i < k; i++) out[base + i * 8] = data[i * n + o];
      else for (let i = 0, src = o * k; i < k; i++) out[base + i * 8] = data[src + i];
    }
    return { w: place(out), kind, n, k, panels };
  };

  // The reference normalizes the embedding with blocks.0.ln0 once at load time; the GPU path does the same.
  const embT = get('emb.weight');
  const V = embT.shape[0];
  const emb = normalizedEmbedding(embT, vals('blocks.0.ln0.weight'), vals('blocks.0.ln0.bias'));
  const embAt = place(wide ? emb : f32ToF16(emb));

  let maxLora = 8;
  const layers: CpuLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    const first = l === 0;
    const layer: CpuLayer = {
      ln1: stack([vals(`${p}ln1.weight`), vals(`${p}ln1.bias`)]),
      ln2: stack([vals(`${p}ln2.weight`), vals(`${p}ln2.bias`)]),
      attMix: stack(['x_r', 'x_w', 'x_k', 'x_v', 'x_a', 'x_g'].map((n) => vals(a + n))),
      r: await matrix(linear(`${a}receptance.weight`)),
      k: await matrix(linear(`${a}key.weight`)),
      v: await matrix(linear(`${a}value.weight`)),
      o: await matrix(linear(`${a}output.weight`)),
      w1: await matrix(lora(`${a}w1`)),
      a1: await matrix(lora(`${a}a1`)),
      g1: await matrix(lora(`${a}g1`)),
      v1: first ? null : await matrix(lora(`${a}v1`)),
      w2: await matrix(lora(`${a}w2`)),
      a2: await matrix(lora(`${a}a2`)),
      g2: await matrix(lora(`${a}g2`)),
      v2: first ? null : await matrix(lora(`${a}v2`)),
      prep: stack([vals(`${a}w0`), vals(`${a}a0`), first ? new Float32Array(C) : vals(`${a}v0`), vals(`${a}k_k`), vals(`${a}k_a`)]),
      post: stack([vals(`${a}r_k`), vals(`${a}ln_x.weight`), vals(`${a}ln_x.bias`)]),
      ffnMix: stack([vals(`${p}ffn.x_k`)]),
      ffnK: await matrix(linear(`${p}ffn.key.weight`)),
      ffnV: await matrix(linear(`${p}ffn.value.weight`)),
    };
    for (const m of [layer.w1, layer.a1, layer.g1, layer.v1]) if (m) maxLora = Math.max(maxLora, m.panels * 8);
    layers.push(layer);
  }
  // RWKV-7a: the tables stay as stored (f16 unless f32 weights, like the embedding); see shaders/rwkv7a_gate.wgsl
  // for why SE is not merged at load.
  let deepEmbed: CpuDeepEmbedLayer[] | undefined;
  if (info.version === 'v7a') {
    deepEmbed = [];
    for (let l = 0; l < info.nLayer; l++) {
      const f = `blocks.${l}.ffn.`;
      const table = get(`${f}s_emb.weight`);
      const [s1, s2, s0] = [vals(`${f}s1`), vals(`${f}s2`), vals(`${f}s0`)];
      const gate = new Float32Array(s1.length + s2.length + s0.length);
      gate.set(s1);
      gate.set(s2, s1.length);
      gate.set(s0, s1.length + s2.length);
      deepEmbed.push({ table: place(wide ? toF32(table) : toF16Bits(table)), gate: place(gate), sx: await matrix(linear(`${f}s_emb_x.weight`)) });
    }
  }
  const lnOut: [number, number] = [place(Float32Array.from(vals('ln_out.weight'))), place(Float32Array.from(vals('ln_out.bias')))];
  const head = await matrix(linear('head.weight'));
  const weights: CpuWeights = { precision, deepEmbed, wide: wide ? 1 : 0, hasInt8, emb: embAt, layers, lnOut, head, maxLora, bytes };
  return {
    weights,
    write(memory: WebAssembly.Memory) {
      const u8 = new Uint8Array(memory.buffer);
      for (const { at, data } of writes) u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
      writes.length = 0;
    },
  };
}

