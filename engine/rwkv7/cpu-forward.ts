// The RWKV-7 forward pass on the CPU: the same batched step as the GPU runtime (runtime.ts), on the WebAssembly
// SIMD kernels. All tokens of a sub-pass are flattened into one [T, C] batch (each slot's tokens contiguous), so
// every matrix product reads its weights once for the whole batch; only the WKV recurrence walks each slot's
// tokens in order. Runs in the compute worker (cpu-worker.ts), never on the host's event loop.

import type { CpuKernels } from '../cpu/wasm-kernels';
import type { MatmulTask, ThreadPool } from '../cpu/thread-pool';
import type { CpuMatrix, CpuWeights } from './cpu-weights';
import { DEEP_EMBED_ROW } from '../model-spec';

/** Addresses (bytes) of the scratch regions and states in the shared memory, and the sizes behind them. */
export interface CpuLayout {
  C: number;
  H: number;
  N: number;
  F: number;
  V: number;
  nLayer: number;
  slots: number;
  /** Most tokens and output rows of one sub-pass. */
  TMAX: number;
  RMAX: number;
  /** Floats in one slot's state; per layer: att_x [C], att_kv [H, N, N], ffn_x [C]. */
  stateSize: number;
  state: number;
  ids: number;
  prevAddr: number;
  rows: number;
  x: number;
  xn: number;
  /** 6 regions of TMAX*C: r, w, k, v, a, g inputs. */
  mix: number;
  /** 9 regions of TMAX*C: r, w, k, v, a, g, kk, y, v LoRA. */
  tm: number;
  /** 4 regions of TMAX*maxLora: the LoRA hidden layers of w, a, g, v. */
  lora: number;
  loraStride: number;
  vfirst: number;
  xx: number;
  ffk: number;
  xo: number;
  logits: number;
  /** RWKV-7a (else 0): each token's e·s_emb_xᵀ per layer, [layer][TMAX][1024]; and the gate kernel's 64 floats. */
  se: number;
  deScratch: number;
  /** Per-thread scratch for widened f16 and int8 panels: `threads` blocks of scratchBytes. */
  scratch: number;
  scratchBytes: number;
}

/** One slot's tokens inside a sub-pass. */
export interface CpuSegment {
  slot: number;
  /** First token's index in the sub-pass, token count. */
  start: number;
  count: number;
  /** Which rows go out: 'none', the last token's ('last', 'top'), or every token's ('all'). */
  out: 'none' | 'last' | 'all';
  /** Row of the call's result where this segment's first output row goes. */
  resultRow: number;
}

export interface CpuSubPass {
  ids: Int32Array;
  segments: CpuSegment[];
}

const ACT_TANH = 1;
const ACT_SIGMOID = 2;
const ACT_RELU_SQ = 3;

export class Rwkv7CpuForward {
  private readonly f32: Float32Array;
  private readonly i32: Int32Array;
  private readonly u32: Uint32Array;

  constructor(
    memory: WebAssembly.Memory,
    private readonly k: CpuKernels,
    private readonly pool: ThreadPool,
    private readonly L: CpuLayout,
    private readonly W: CpuWeights,
  ) {
    this.f32 = new Float32Array(memory.buffer);
    this.i32 = new Int32Array(memory.buffer);
    this.u32 = new Uint32Array(memory.buffer);
  }

  /** Runs every sub-pass in order and returns the rows asked for: [resultRows, V]. */
  run(passes: CpuSubPass[], resultRows: number): Float32Array {
    const out = new Float32Array(resultRows * this.L.V);
    for (const sp of passes) this.subPass(sp, out);
    return out;
  }

  private mm(T: number, tasks: MatmulTask[]) {
    this.pool.matmul(T, tasks, this.L.scratch, this.L.scratchBytes);
  }

  private task(m: CpuMatrix, x: number, xs: number, y: number, ys: number, act = 0, accum = false): MatmulTask {
    return { w: m.w, kind: m.kind, n: m.n, k: m.k, panels: m.panels, x, xs, y, ys, act, accum };
  }

  private subPass(sp: CpuSubPass, out: Float32Array) {
    const { k, L, W } = this;
    const { C, N, H } = L;
    const T = sp.ids.length;
    const REG = L.TMAX * C;
    const regB = REG * 4;
    const stateB = L.stateSize * 4;
    const layerB = (2 * C + H * N * N) * 4;
    this.i32.set(sp.ids, L.ids >> 2);
    k.embed(W.emb, W.wide, L.ids, T, C, L.x);
    const de = W.deepEmbed;
    const seAt = (l: number) => L.se + l * L.TMAX * DEEP_EMBED_ROW * 4;
    // RWKV-7a: while x still holds the tokens' normalized embeddings, their e·s_emb_xᵀ for every layer's gate.
    if (de) this.mm(T, de.map((d, l) => this.task(d.sx, L.x, C, seAt(l), DEEP_EMBED_ROW)));

    /** The slot's shift state (att or ffn) of layer l for each segment's first token, 0 for the others. */
    const setPrev = (l: number, ffn: boolean) => {
      const at = L.prevAddr >> 2;
      this.u32.fill(0, at, at + T);
      for (const s of sp.segments) {
        this.u32[at + s.start] = L.state + s.slot * stateB + l * layerB + (ffn ? layerB - C * 4 : 0);
      }
    };
    /** Saves each segment's last normalized token as the slot's shift state. */
    const saveShift = (l: number, ffn: boolean) => {
      for (const s of sp.segments) {
        const dst = (L.state + s.slot * stateB + l * layerB + (ffn ? layerB - C * 4 : 0)) >> 2;
        const src = (L.xn >> 2) + (s.start + s.count - 1) * C;
        this.f32.copyWithin(dst, src, src + C);
      }
    };
    const mix = (m: number) => L.mix + m * regB;
    const tm = (m: number) => L.tm + m * regB;
    const lora = (m: number) => L.lora + m * L.TMAX * L.loraStride * 4;
    const ls = L.loraStride;

    W.layers.forEach((P, l) => {
      setPrev(l, false);
      k.lnShift(L.x, T, C, P.ln1, L.xn, L.prevAddr, P.attMix, 6, L.mix, REG);
      saveShift(l, false);
      const first: MatmulTask[] = [
        this.task(P.r, mix(0), C, tm(0), C),
        this.task(P.k, mix(2), C, tm(2), C),
        this.task(P.v, mix(3), C, tm(3), C),
        this.task(P.w1, mix(1), C, lora(0), ls, ACT_TANH),
        this.task(P.a1, mix(4), C, lora(1), ls),
        this.task(P.g1, mix(5), C, lora(2), ls, ACT_SIGMOID),
      ];
      const second: MatmulTask[] = [
        this.task(P.w2, lora(0), ls, tm(1), C),
        this.task(P.a2, lora(1), ls, tm(4), C),
        this.task(P.g2, lora(2), ls, tm(5), C),
      ];
      if (P.v1 && P.v2) {
        first.push(this.task(P.v1, mix(3), C, lora(3), ls));
        second.push(this.task(P.v2, lora(3), ls, tm(8), C));
      }
      this.mm(T, first);
      this.mm(T, second);
      this.pool.prep(L.tm, REG, T, C, N, P.prep, L.vfirst, l === 0 ? 1 : 0);
      this.pool.wkv({
        tm: L.tm,
        region: REG,
        C,
        N,
        H,
        segments: sp.segments.map((s) => [s.start, s.count, L.state + s.slot * stateB + l * layerB + C * 4]),
      });
      this.pool.post(L.tm, REG, T, C, N, P.post, L.xx);
      this.mm(T, [this.task(P.o, L.xx, C, L.x, C, 0, true)]);

      setPrev(l, true);
      k.lnShift(L.x, T, C, P.ln2, L.xn, L.prevAddr, P.ffnMix, 1, L.mix, REG);
      saveShift(l, true);
      this.mm(T, [this.task(P.ffnK, L.mix, C, L.ffk, L.F, ACT_RELU_SQ)]);
      if (de) k.deepEmbedGate(T, C, L.F, L.ids, de[l].table, W.wide, seAt(l), L.xn, de[l].gate, L.ffk, L.deScratch);
      this.mm(T, [this.task(P.ffnV, L.ffk, L.F, L.x, C, 0, true)]);
    });

    // Output rows: the last token of 'last' segments, every token of 'all' ones.
    const rows: number[] = [];
    const dest: number[] = [];
    for (const s of sp.segments) {
      if (s.out === 'last') {
        rows.push(s.start + s.count - 1);
        dest.push(s.resultRow);
      } else if (s.out === 'all') {
        for (let i = 0; i < s.count; i++) {
          rows.push(s.start + i);
          dest.push(s.resultRow + i);
        }
      }
    }
    const R = rows.length;
    if (R === 0) return;
    if (R > L.RMAX) throw new Error(`internal: ${R} output rows in a sub-pass of at most ${L.RMAX}`);
    this.i32.set(rows, L.rows >> 2);
    k.layerNormRows(L.x, L.rows, R, C, W.lnOut[0], W.lnOut[1], L.xo);
    this.mm(R, [this.task(W.head, L.xo, C, L.logits, L.V)]);
    const V = L.V;
    const base = L.logits >> 2;
    for (let r = 0; r < R; r++) out.set(this.f32.subarray(base + r * V, base + (r + 1) * V), dest[r] * V);
  }
}
