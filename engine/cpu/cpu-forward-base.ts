// The version-independent half of a forward pass on the CPU backend, as engine/gpu/slot-runtime.ts is on the GPU:
// the sub-passes of a call, the embedding, the slots' token-shift states, the output rows (final layer norm and
// head), the matrix-product tasks, and the channel mix RWKV-4/5/6 share. A version's pass (engine/rwkv7/,
// engine/rwkv6/, engine/rwkv4/ `cpu-forward.ts`) extends it with its layers. All tokens of a sub-pass are
// flattened into one [T, C] batch (each slot's tokens contiguous), so every matrix product reads its weights
// once for the whole batch; only the recurrences walk each slot's tokens in order. Runs in the compute worker
// (cpu-worker.ts), never on the host's event loop.

import type { Arena } from './arena';
import type { CpuKernels } from './wasm-kernels';
import type { MatmulTask, ThreadPool } from './thread-pool';
import type { CpuCommonWeights, CpuMatrix } from './cpu-weight-writer';
import type { GrowingRows } from './growing-rows';
import type { LogitAdjust, TopLogits } from '../types';
import { reduceRow, topScratchBytes } from './row-stats';
import { applyAdjust, topLogits } from './top-logits-cpu';
import { TOP_CAPACITY } from '../rwkv7/top-logits';

/** Addresses (bytes) of the regions every version's pass uses, and the sizes behind them. */
export interface CpuBaseLayout {
  C: number;
  V: number;
  nLayer: number;
  slots: number;
  /** Most tokens and output rows of one sub-pass. */
  TMAX: number;
  RMAX: number;
  /** Floats in one slot's state: per layer, the time mix's shift state first and the channel mix's last (C each). */
  stateSize: number;
  /** Floats each token adds to a slot's state, kept beside the memory (GrowingRows); 0: a fixed-size state. */
  stateRowFloats: number;
  /** Most rows one slot's growing state may hold (the context limit; set by CpuRuntime before the thread starts). */
  maxStateRows?: number;
  state: number;
  ids: number;
  prevAddr: number;
  rows: number;
  /** The residual stream [TMAX, C], and its layer norm. */
  x: number;
  xn: number;
  xo: number;
  logits: number;
  /** Where output 'top' reduces a row (row-stats.ts reduceRow): topScratchBytes(TOP_CAPACITY) bytes. */
  top: number;
  /** Per-thread scratch for widened f16 and int8 panels: `threads` blocks of scratchBytes (set by the runtime). */
  scratch: number;
  scratchBytes: number;
}

/** Reserves the regions of CpuBaseLayout but the per-thread scratch. */
export function allocBaseLayout(
  arena: Arena,
  d: Pick<CpuBaseLayout, 'C' | 'V' | 'nLayer' | 'slots' | 'TMAX' | 'RMAX' | 'stateSize'> & { stateRowFloats?: number },
): CpuBaseLayout {
  const { C, V, slots, TMAX, RMAX, stateSize } = d;
  return {
    ...d,
    stateRowFloats: d.stateRowFloats ?? 0,
    state: arena.allocFloats(slots * stateSize),
    ids: arena.allocFloats(TMAX),
    prevAddr: arena.allocFloats(TMAX),
    rows: arena.allocFloats(RMAX),
    x: arena.allocFloats(TMAX * C),
    xn: arena.allocFloats(TMAX * C),
    xo: arena.allocFloats(RMAX * C),
    logits: arena.allocFloats(RMAX * V),
    top: arena.alloc(topScratchBytes(TOP_CAPACITY)),
    scratch: 0,
    scratchBytes: 0,
  };
}

/** One slot's tokens inside a sub-pass. */
export interface CpuSegment {
  slot: number;
  /** First token's index in the sub-pass, token count. */
  start: number;
  count: number;
  /** Which rows go out: 'none', the last token's ('last'; 'top': reduced here), or every token's ('all'). */
  out: 'none' | 'last' | 'all' | 'top';
  /** Row of the call's result where this segment's first output row goes; for 'top', the index of its reduction. */
  resultRow: number;
}

export interface CpuSubPass {
  ids: Int32Array;
  segments: CpuSegment[];
}

/** A layer's channel mix (RWKV-4/5/6): x += sigmoid(R xr) ⊙ V relu(K xk)², after ln2 and its token shift. */
export interface CpuChannelMix {
  /** [weight; bias] of ln2. */
  ln2: number;
  /** The token-shift mixes of the key and receptance inputs, [2, C] in lnShift's form xn + (prev - xn) * m. */
  ffnShift: number;
  ffnK: CpuMatrix;
  ffnR: CpuMatrix;
  ffnV: CpuMatrix;
}

/** Where the channel mix works: two [TMAX, C] regions `region` floats apart for its inputs, hidden [TMAX, F], r and v [TMAX, C]. */
export interface CpuChannelMixScratch {
  inputs: number;
  region: number;
  hidden: number;
  F: number;
  r: number;
  v: number;
}

export const ACT_TANH = 1;
export const ACT_SIGMOID = 2;
export const ACT_RELU_SQ = 3;

export abstract class CpuForwardBase<L extends CpuBaseLayout, W extends CpuCommonWeights> {
  protected readonly f32: Float32Array;
  protected readonly i32: Int32Array;
  protected readonly u32: Uint32Array;
  /** Floats of one layer's state. */
  private readonly layerFloats: number;

  constructor(
    memory: WebAssembly.Memory,
    protected readonly k: CpuKernels,
    protected readonly pool: ThreadPool,
    protected readonly L: L,
    protected readonly W: W,
  ) {
    this.f32 = new Float32Array(memory.buffer);
    this.i32 = new Int32Array(memory.buffer);
    this.u32 = new Uint32Array(memory.buffer);
    this.layerFloats = L.stateSize / L.nLayer;
  }

  /** The rows a growing state keeps beside the memory (RWKV-7b); null for a fixed-size state. */
  readonly growing: GrowingRows | null = null;

  /** The layers of one sub-pass: x holds the tokens' embeddings before, the residual stream after. */
  protected abstract layers(sp: CpuSubPass): void;

  /**
   * Runs every sub-pass in order and returns the rows asked for, [resultRows, V], and the 'top' reductions
   * (segments with out 'top' point into them; tops[i] is the i-th's mask and adjustments).
   */
  run(passes: CpuSubPass[], resultRows: number, tops: (LogitAdjust | undefined)[] = []): { logits: Float32Array; tops: TopLogits[] } {
    const out = { logits: new Float32Array(resultRows * this.L.V), tops: new Array<TopLogits>(tops.length) };
    for (const sp of passes) this.subPass(sp, out, tops);
    return out;
  }

  protected mm(T: number, tasks: MatmulTask[]) {
    this.pool.matmul(T, tasks, this.L.scratch, this.L.scratchBytes);
  }

  protected task(m: CpuMatrix, x: number, xs: number, y: number, ys: number, act = 0, accum = false): MatmulTask {
    return { w: m.w, kind: m.kind, n: m.n, k: m.k, panels: m.panels, x, xs, y, ys, act, accum };
  }

  /** Byte address of a slot's state of layer l, plus `floats` into it. */
  protected stateAt(slot: number, l: number, floats = 0): number {
    return this.L.state + (slot * this.L.stateSize + l * this.layerFloats + floats) * 4;
  }

  /** The address of the slot's shift state (att or ffn) of layer l for each segment's first token, 0 for the others. */
  protected setPrev(sp: CpuSubPass, l: number, ffn: boolean) {
    const at = this.L.prevAddr >> 2;
    this.u32.fill(0, at, at + sp.ids.length);
    for (const s of sp.segments) this.u32[at + s.start] = this.shiftAt(s.slot, l, ffn);
  }

  /** Saves each segment's last normalized token as the slot's shift state. */
  protected saveShift(sp: CpuSubPass, l: number, ffn: boolean) {
    const C = this.L.C;
    for (const s of sp.segments) {
      const src = (this.L.xn >> 2) + (s.start + s.count - 1) * C;
      this.f32.copyWithin(this.shiftAt(s.slot, l, ffn) >> 2, src, src + C);
    }
  }

  private shiftAt(slot: number, l: number, ffn: boolean): number {
    return this.stateAt(slot, l, ffn ? this.layerFloats - this.L.C : 0);
  }

  /**
   * Layer norm of x into xn, then M token-shift mixes xn + (prev - xn) * mix[m] into `out` (copy m at m·region
   * floats), prev being the slot's previous normalized token; then the slots' last normalized tokens become the
   * shift state.
   */
  protected normShift(sp: CpuSubPass, l: number, ffn: boolean, ln: number, mix: number, M: number, out: number, region: number) {
    const { L } = this;
    this.setPrev(sp, l, ffn);
    this.pool.lnShift(L.x, sp.ids.length, L.C, ln, L.xn, L.prevAddr, mix, M, out, region, L.scratch, L.scratchBytes);
    this.saveShift(sp, l, ffn);
  }

  /** The channel mix of RWKV-4/5/6 (CpuChannelMix), added to x. */
  protected channelMix(sp: CpuSubPass, l: number, P: CpuChannelMix, at: CpuChannelMixScratch) {
    const T = sp.ids.length;
    const C = this.L.C;
    this.normShift(sp, l, true, P.ln2, P.ffnShift, 2, at.inputs, at.region);
    this.mm(T, [
      this.task(P.ffnK, at.inputs, C, at.hidden, at.F, ACT_RELU_SQ),
      this.task(P.ffnR, at.inputs + at.region * 4, C, at.r, C, ACT_SIGMOID),
    ]);
    this.mm(T, [this.task(P.ffnV, at.hidden, at.F, at.v, C)]);
    this.k.gatedAdd(this.L.x, at.r, at.v, T * C);
  }

  private subPass(sp: CpuSubPass, out: { logits: Float32Array; tops: TopLogits[] }, adjusts: (LogitAdjust | undefined)[]) {
    const { k, L, W } = this;
    const T = sp.ids.length;
    this.i32.set(sp.ids, L.ids >> 2);
    k.embed(W.emb, W.wide, L.ids, T, L.C, L.x);
    this.layers(sp);

    // Output rows: the last token of 'last' and 'top' segments, every token of 'all' ones.
    const rows: number[] = [];
    const dest: number[] = [];
    const top: boolean[] = [];
    for (const s of sp.segments) {
      if (s.out === 'last' || s.out === 'top') {
        rows.push(s.start + s.count - 1);
        dest.push(s.resultRow);
        top.push(s.out === 'top');
      } else if (s.out === 'all') {
        for (let i = 0; i < s.count; i++) {
          rows.push(s.start + i);
          dest.push(s.resultRow + i);
          top.push(false);
        }
      }
    }
    const R = rows.length;
    if (R === 0) return;
    if (R > L.RMAX) throw new Error(`internal: ${R} output rows in a sub-pass of at most ${L.RMAX}`);
    this.i32.set(rows, L.rows >> 2);
    k.layerNormRows(L.x, L.rows, R, L.C, W.lnOut[0], W.lnOut[1], L.xo);
    this.mm(R, [this.task(W.head, L.xo, L.C, L.logits, L.V)]);
    const V = L.V;
    const base = L.logits >> 2;
    for (let r = 0; r < R; r++) {
      const row = this.f32.subarray(base + r * V, base + (r + 1) * V);
      if (!top[r]) {
        out.logits.set(row, dest[r] * V);
        continue;
      }
      // In place: the row is this sub-pass's scratch.
      applyAdjust(row, adjusts[dest[r]]);
      out.tops[dest[r]] = topLogits(reduceRow(k, this.f32.buffer, L.logits + r * V * 4, V, TOP_CAPACITY, L.top));
    }
  }
}
