// Lays out a checkpoint's weights for the CPU kernels (kernels.ts), for every version's CPU pass: every matrix in
// panels of 8 output rows ([k][8] per panel, so the kernels multiply 8 rows against one broadcast input) in the
// precision the GPU path uses (f16 by default, f32 on request) or int8 with per-row scales; the embedding table
// row-major after the load-time ln0 normalization; small vectors f32. int8 quantises every matrix of the layers
// `quantLayers` covers (all by default; the later layers' matrices stay f16) and the head; each matrix carries its
// kind, so one product call can mix them. Two phases: the writer reserves addresses in the arena and keeps the
// host copies (yielding to the event loop before every matrix); `write` copies them into the memory once it exists.

import { normalizedEmbedding } from '../embedding-norm';
import type { Checkpoint, RawTensor } from '../types';
import { f32ToF16, toF16Bits, toF32 } from '../loader/dtype';
import { checkpointTensor } from '../loader/checkpoint';
import type { Arena } from './arena';
import { int8Panels } from './int8-quant';
import { i16Panels, quantizeRowsI16 } from './i16-quant';
import { inQuantisedLayers } from '../quant/quantised-matrices';
import { yieldToEventLoop, type WeightValues } from '../quant/weight-values';
import { quantiserInput } from '../rwkv7/weights';
import type { WeightStorage } from '../precision';

export type CpuPrecision = 'f16' | 'f32' | 'int8';

/** How the CPU backend stores a model: a precision it runs and the layers int8 quantises (precision.ts WeightStorage). */
export type CpuWeightStorage = WeightStorage & { precision: CpuPrecision };

/** The kernels' matrix kinds (kernels.ts `matmul`); i16 holds f16 matrices as 16-bit integers (i16-quant.ts). */
export const MATRIX_KIND = { f16: 0, f32: 1, int8: 2, i16: 3 } as const;

/** How f16 matrices are stored on the CPU: as f16 (widened in the products) or as i16 codes with row scales. */
export type F16Storage = 'f16' | 'i16';

/**
 * RWKV_CPU_F16_AS (read once per load): 'i16' (default) or 'f16'. i16 computes the products with integer dot
 * products (2.5 instructions per 8 multiply-adds instead of 8) at an error below f16 rounding for the weights
 * (i16-quant.ts) plus the inputs' per-token 16-bit quantisation; 'f16' keeps the exact products of the f16 values.
 */
export function f16StorageFromEnv(env: NodeJS.ProcessEnv = process.env): F16Storage {
  const v = env.RWKV_CPU_F16_AS;
  if (v === undefined || v === '' || v === 'i16') return 'i16';
  if (v === 'f16') return 'f16';
  throw new Error(`RWKV_CPU_F16_AS must be 'f16' or 'i16', got ${JSON.stringify(v)}`);
}

/** One matrix: its panels' address, output rows n (padded to whole panels with zero rows), input width k. */
export interface CpuMatrix {
  w: number;
  /** Its storage (MATRIX_KIND): 0 f16, 1 f32, 2 int8, 3 i16. */
  kind: number;
  n: number;
  k: number;
  panels: number;
}

/** What every version's CPU weights hold besides its layers; plain data, so it can be posted to a worker. */
export interface CpuCommonWeights {
  precision: CpuPrecision;
  /** 1 when the embedding table is f32 (the kernels' `embed` `wide`). */
  wide: number;
  /** Whether any matrix is int8 (the products' scratch is sized for it then). */
  hasInt8: boolean;
  /** Whether any matrix is i16 (likewise). */
  hasI16: boolean;
  /** [V, C] embedding table, f16 (also for int8) or f32. */
  emb: number;
  lnOut: [number, number];
  head: CpuMatrix;
  /** Bytes of all weights. */
  bytes: number;
}

/**
 * A matrix's values: element (output row o, input i) at data[offset + o * rowStride + i * colStride]. A torch
 * Linear [out, in] has rowStride k and colStride 1; a LoRA-like [in, out] tensor rowStride 1 and colStride n.
 */
export interface MatrixSource {
  name: string;
  /** Its storage (MATRIX_KIND, the writer's `kindOf`). */
  kind: number;
  /** In that kind: int8 the quantisers' input (f16 bits or f32 values, quantised here), f32 values, f16 bits (f16 and i16). */
  data: WeightValues;
  n: number;
  k: number;
  offset: number;
  rowStride: number;
  colStride: number;
}

export class CpuWeightWriter {
  readonly precision: CpuPrecision;
  readonly wide: boolean;
  /** How this load stores the matrices it keeps in f16 (f16StorageFromEnv). */
  readonly f16As: F16Storage;
  private readonly writes: { at: number; data: Float32Array | Uint16Array | Uint8Array }[] = [];
  private placed = 0;
  private int8Placed = false;
  private i16Placed = false;

  constructor(
    private readonly arena: Arena,
    private readonly ck: Checkpoint,
    private readonly weightStorage: CpuWeightStorage,
    private readonly C: number,
  ) {
    this.precision = weightStorage.precision;
    this.wide = weightStorage.precision === 'f32';
    this.f16As = f16StorageFromEnv();
  }

  /** Whether any matrix placed so far is int8. */
  get hasInt8(): boolean {
    return this.int8Placed;
  }

  /** Whether any matrix placed so far is i16. */
  get hasI16(): boolean {
    return this.i16Placed;
  }

  /** Bytes placed so far. */
  get bytes(): number {
    return this.placed;
  }

  tensor(name: string): RawTensor {
    return checkpointTensor(this.ck, name);
  }

  /** A tensor's values as f32. */
  vals(name: string): Float32Array {
    return toF32(this.tensor(name));
  }

  /** Reserves room for `data` and returns its address; the bytes are copied by `write`. */
  place(data: Float32Array | Uint16Array | Uint8Array): number {
    const at = this.arena.alloc(data.byteLength);
    this.writes.push({ at, data });
    this.placed += data.byteLength;
    return at;
  }

  /** Vectors of C floats stacked [parts, C], f32. */
  stack(parts: Float32Array[]): number {
    const { C } = this;
    const out = new Float32Array(parts.length * C);
    parts.forEach((p, i) => out.set(p.subarray(0, C), i * C));
    return this.place(out);
  }

  /**
   * A matrix's storage: int8 for every matrix of the layers the storage quantises (and the model-wide ones: the
   * head), else the float precision (f16 for int8's later layers, stored as `f16As` says). Matrices read as
   * `columns` of one tensor share its layer, so its kind.
   */
  kindOf(name: string): number {
    if (this.precision === 'int8' && inQuantisedLayers(name, this.weightStorage)) return MATRIX_KIND.int8;
    if (this.wide) return MATRIX_KIND.f32;
    return this.f16As === 'i16' ? MATRIX_KIND.i16 : MATRIX_KIND.f16;
  }

  /** A tensor's values as a matrix of `kind` reads them: the quantisers' input for int8, f32 values, f16 bits. */
  private valuesFor(t: RawTensor, kind: number): WeightValues {
    return kind === MATRIX_KIND.int8 ? quantiserInput(t) : kind === MATRIX_KIND.f32 ? toF32(t) : toF16Bits(t);
  }

  /** A matrix stored [out, in] (torch Linear). */
  linear(name: string): MatrixSource {
    const t = this.tensor(name);
    const [n, k] = t.shape;
    const kind = this.kindOf(name);
    return { name, kind, data: this.valuesFor(t, kind), n, k, offset: 0, rowStride: k, colStride: 1 };
  }

  /** A matrix stored [in, out] (used as x @ W: the LoRA-like tensors). */
  lora(name: string): MatrixSource {
    const t = this.tensor(name);
    return this.columns(name, this.storage(name), t.shape[0], t.shape[1]);
  }

  /**
   * Outputs [from, from + count) of a matrix stored [inDim, outDim] starting at `offset` of `data` (a tensor's
   * values as `storage` reads them for this name's kind).
   */
  columns(name: string, data: WeightValues, inDim: number, outDim: number, offset = 0, from = 0, count = outDim): MatrixSource {
    return { name, kind: this.kindOf(name), data, n: count, k: inDim, offset: offset + from, rowStride: 1, colStride: outDim };
  }

  /** A tensor's values as its matrices' kind reads them (for `columns`). */
  storage(name: string): WeightValues {
    return this.valuesFor(this.tensor(name), this.kindOf(name));
  }

  /** Lays a matrix out in panels (int8 and i16: quantised first); yields to the event loop before it. */
  async matrix(s: MatrixSource): Promise<CpuMatrix> {
    await yieldToEventLoop();
    const { data, kind, n, k, offset, rowStride, colStride } = s;
    const panels = Math.ceil(n / 8);
    if (kind === MATRIX_KIND.int8 || kind === MATRIX_KIND.i16) {
      let rows = data;
      if (offset !== 0 || rowStride !== k || colStride !== 1) {
        // A LoRA-like [in, out] matrix or a block of one: its [out, in] rows first, same element type (they are small).
        rows = data instanceof Uint16Array ? new Uint16Array(n * k) : new Float32Array(n * k);
        for (let o = 0; o < n; o++) for (let i = 0; i < k; i++) rows[o * k + i] = data[offset + o * rowStride + i * colStride];
      }
      if (kind === MATRIX_KIND.i16) {
        this.i16Placed = true;
        return { w: this.place(i16Panels(await quantizeRowsI16(rows, n, k), n, k)), kind, n, k, panels };
      }
      this.int8Placed = true;
      return { w: this.place(await int8Panels(rows, n, k)), kind, n, k, panels };
    }
    const wide = kind === MATRIX_KIND.f32;
    if (wide !== (data instanceof Float32Array)) throw new Error(`internal: ${s.name}'s values are not in its kind (${kind})`);
    const out = wide ? new Float32Array(panels * 8 * k) : new Uint16Array(panels * 8 * k);
    for (let o = 0; o < n; o++) {
      const base = (o >> 3) * 8 * k + (o & 7);
      const src = offset + o * rowStride;
      if (colStride === 1) for (let i = 0; i < k; i++) out[base + i * 8] = data[src + i];
      else for (let i = 0; i < k; i++) out[base + i * 8] = data[src + i * colStride];
    }
    return { w: this.place(out), kind, n, k, panels };
  }

  /**
   * The embedding normalized with blocks.0.ln0 (as the reference does once at load), the output norm and head;
   * a planner adds `bytes`, `hasInt8` and `hasI16` once every matrix is placed.
   */
  async common(): Promise<Omit<CpuCommonWeights, 'bytes' | 'hasInt8' | 'hasI16'>> {
    const emb = normalizedEmbedding(this.tensor('emb.weight'), this.vals('blocks.0.ln0.weight'), this.vals('blocks.0.ln0.bias'));
    return {
      precision: this.precision,
      wide: this.wide ? 1 : 0,
      emb: this.place(this.wide ? emb : f32ToF16(emb)),
      lnOut: [this.place(Float32Array.from(this.vals('ln_out.weight'))), this.place(Float32Array.from(this.vals('ln_out.bias')))],
      head: await this.matrix(this.linear('head.weight')),
    };
  }

  /** Copies every host array to its address; call once the memory exists. */
  write(memory: WebAssembly.Memory): void {
    const u8 = new Uint8Array(memory.buffer);
    for (const { at, data } of this.writes) u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
    this.writes.length = 0;
  }
}
