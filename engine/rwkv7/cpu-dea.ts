// RWKV-7b's DEA attention on the CPU backend, one layer of one sub-pass (../shared/golden/README.md "RWKV-7a and
// RWKV-7b"): from the block input x, per token q = qq·x, k̃ = (x·k1·k2) ⊙ KE[tok], ṽ = tanh(x·v1·v2) ⊙ VE[tok]; a
// token shift with the previous token's raw q, k̃, ṽ (the fixed state's dea_q/k/v); Q, K, V = LN of the shifted
// ones; softmax over every cached position j ≤ t of 64·tanh(Q·K_j/1024), times V. The projections run on the
// kernels for the whole batch; the walk over the cache runs here, each slot's tokens in order, appending each
// token's K and V (its row of the growing state, GrowingRows) before it attends, so a chunk is causal over the
// cached rows and its own. KE[tok] = k_emb[tok] + e·k_emb_xᵀ (VE alike): the e·…ᵀ halves are computed per token
// at the start of the pass, while x still holds the normalized embeddings.

import type { MatmulTask } from '../cpu/thread-pool';
import type { GrowingRows } from '../cpu/growing-rows';
import type { CpuSubPass } from '../cpu/cpu-forward-base';
import { ACT_TANH } from '../cpu/cpu-forward-base';
import type { CpuMatrix } from '../cpu/cpu-weight-writer';
import { getF16ToF32Table } from '../loader/dtype';
import type { CpuDeaLayer } from './cpu-dea-weights';
import { deaVecOffsets } from './dea-vectors';
import { DEA_QK } from './dea-sizes';

const LN_EPS = 1e-5;
/** The reference's soft cap: 64·tanh(s / 1024). */
const CAP = 64;
const CAP_SCALE = 1024;

/** Scratch regions (byte addresses) of the DEA step. */
export interface CpuDeaScratch {
  /** Per layer: e·k_emb_xᵀ [TMAX, 256] then e·v_emb_xᵀ [TMAX, C]. */
  embed: number;
  q: number;
  kc: number;
  vc: number;
  k: number;
  v: number;
  /** DEA's output [TMAX, C], added to x after the time mix. */
  out: number;
}

/** What the step borrows from the forward pass that runs it. */
export interface CpuDeaHost {
  f32: Float32Array;
  C: number;
  TMAX: number;
  /** The residual stream [TMAX, C] (byte address). */
  x: number;
  mm(T: number, tasks: MatmulTask[]): void;
  task(m: CpuMatrix, x: number, xs: number, y: number, ys: number, act?: number): MatmulTask;
  /** Byte address of the slot's fixed state of layer l, plus `floats`. */
  stateAt(slot: number, l: number, floats: number): number;
}

export class CpuDeaStep {
  private readonly u16: Uint16Array;
  private readonly f16 = getF16ToF32Table();
  private readonly vecs: ReturnType<typeof deaVecOffsets>;
  /** Per-token scratch: shifted q, k, v and the scores over the cache. */
  private readonly qs = new Float32Array(DEA_QK);
  private readonly ks = new Float32Array(DEA_QK);
  private readonly vs: Float32Array;
  /** The attention's output row being summed. */
  private readonly acc: Float32Array;
  private scores = new Float32Array(256);
  /** Each segment's rows before this sub-pass (set by begin). */
  private base: number[] = [];

  constructor(
    private readonly h: CpuDeaHost,
    memory: WebAssembly.Memory,
    private readonly layers: CpuDeaLayer[],
    private readonly S: CpuDeaScratch,
    /** Float offset of dea_q within a layer's fixed state (dea_k, dea_v follow). */
    private readonly shiftOffset: number,
    private readonly wide: boolean,
    private readonly rows: GrowingRows,
  ) {
    this.u16 = new Uint16Array(memory.buffer);
    this.vs = new Float32Array(h.C);
    this.acc = new Float32Array(h.C);
    this.vecs = deaVecOffsets(h.C);
  }

  private embedAt(l: number, v: boolean): number {
    const { C, TMAX } = this.h;
    return this.S.embed + (l * TMAX * (DEA_QK + C) + (v ? TMAX * DEA_QK : 0)) * 4;
  }

  /** Start of a sub-pass, x holding the normalized embeddings: each token's e·k_emb_xᵀ and e·v_emb_xᵀ, and room in each slot's rows. */
  begin(sp: CpuSubPass): void {
    const { h } = this;
    const T = sp.ids.length;
    h.mm(T, this.layers.flatMap((d, l) => [h.task(d.kx, h.x, h.C, this.embedAt(l, false), DEA_QK), h.task(d.vx, h.x, h.C, this.embedAt(l, true), h.C)]));
    this.base = sp.segments.map((s) => {
      const n = this.rows.count(s.slot);
      this.rows.reserve(s.slot, s.count);
      return n;
    });
  }

  /** End of a sub-pass: each slot's rows now include its tokens. */
  end(sp: CpuSubPass): void {
    sp.segments.forEach((s, i) => this.rows.commit(s.slot, this.base[i] + s.count));
  }

  /** Layer l's attention from the block input x into S.out (before the time mix changes x). */
  attend(sp: CpuSubPass, l: number): void {
    const { h, S } = this;
    const { C } = h;
    const d = this.layers[l];
    const T = sp.ids.length;
    h.mm(T, [h.task(d.qq, h.x, C, S.q, DEA_QK), h.task(d.k1, h.x, C, S.kc, 32), h.task(d.v1, h.x, C, S.vc, 32)]);
    h.mm(T, [h.task(d.k2, S.kc, 32, S.k, DEA_QK), h.task(d.v2, S.vc, 32, S.v, C, ACT_TANH)]);
    sp.segments.forEach((s, i) => {
      for (let t = 0; t < s.count; t++) this.token(sp.ids[s.start + t], s.start + t, s.slot, l, this.base[i] + t);
    });
  }

  /** Adds layer l's attention output to x (after the time mix's output was added). */
  addOut(T: number): void {
    const f = this.h.f32;
    const x = this.h.x >> 2;
    const o = this.S.out >> 2;
    for (let i = 0; i < T * this.h.C; i++) f[x + i] += f[o + i];
  }

  /** Table row `tok` of a [V, width] table at `at`, element i. */
  private tableAt(at: number, tok: number, width: number): (i: number) => number {
    if (this.wide) {
      const base = (at >> 2) + tok * width;
      return (i) => this.h.f32[base + i];
    }
    const base = (at >> 1) + tok * width;
    return (i) => this.f16[this.u16[base + i]];
  }

  /** One token t (row `pos` of its slot's cache) through layer l's attention. */
  private token(tok: number, t: number, slot: number, l: number, pos: number): void {
    const { h, S, vecs } = this;
    const { C, f32 } = h;
    const Q = DEA_QK;
    const d = this.layers[l];
    const vec = d.vecs >> 2;
    const prev = h.stateAt(slot, l, this.shiftOffset) >> 2;
    const q = (S.q >> 2) + t * Q;
    const k = (S.k >> 2) + t * Q;
    const v = (S.v >> 2) + t * C;
    const ek = (this.embedAt(l, false) >> 2) + t * Q;
    const ev = (this.embedAt(l, true) >> 2) + t * C;
    const kRow = this.tableAt(d.kTable, tok, Q);
    const vRow = this.tableAt(d.vTable, tok, C);
    // k̃ and ṽ in place of the projections, then the shift: mixed into the scratch, raw ones kept as the new prev.
    for (let i = 0; i < Q; i++) {
      const kt = f32[k + i] * (kRow(i) + f32[ek + i]);
      const qt = f32[q + i];
      this.qs[i] = qt + (f32[prev + i] - qt) * f32[vec + vecs.xq + i];
      this.ks[i] = kt + (f32[prev + Q + i] - kt) * f32[vec + vecs.xk + i];
      f32[prev + i] = qt;
      f32[prev + Q + i] = kt;
    }
    for (let i = 0; i < C; i++) {
      const vt = f32[v + i] * (vRow(i) + f32[ev + i]);
      this.vs[i] = vt + (f32[prev + 2 * Q + i] - vt) * f32[vec + vecs.xv + i];
      f32[prev + 2 * Q + i] = vt;
    }
    layerNorm(this.qs, f32, vec + vecs.lnqW, vec + vecs.lnqB);
    layerNorm(this.ks, f32, vec + vecs.lnkW, vec + vecs.lnkB);
    layerNorm(this.vs, f32, vec + vecs.lnvW, vec + vecs.lnvB);
    // This token's row of the cache, then the attention over rows 0..pos.
    const rows = this.rows.buffer(slot);
    const stride = this.rows.rowFloats;
    const part = l * (Q + C);
    rows.set(this.ks, pos * stride + part);
    rows.set(this.vs, pos * stride + part + Q);
    const n = pos + 1;
    if (this.scores.length < n) this.scores = new Float32Array(Math.max(n, 2 * this.scores.length));
    const max = scoreRows(this.scores, this.qs, rows, n, stride, part);
    const sc = this.scores;
    let sum = 0;
    for (let j = 0; j < n; j++) sum += sc[j] = Math.exp(sc[j] - max);
    const acc = this.acc;
    acc.fill(0);
    for (let j = 0; j < n; j++) addScaled(acc, rows, j * stride + part + Q, sc[j] / sum, C);
    f32.set(acc, (S.out >> 2) + t * C);
  }
}

/** scores[j] = 64·tanh(q·K_j / 1024) for rows j < n (K_j at j·stride + part); returns the largest. */
function scoreRows(scores: Float32Array, q: Float32Array, rows: Float32Array, n: number, stride: number, part: number): number {
  let max = -Infinity;
  for (let j = 0; j < n; j++) {
    const at = j * stride + part;
    // Four partial sums: independent chains the JIT keeps in registers.
    let d0 = 0;
    let d1 = 0;
    let d2 = 0;
    let d3 = 0;
    for (let i = 0; i < DEA_QK; i += 4) {
      d0 += q[i] * rows[at + i];
      d1 += q[i + 1] * rows[at + i + 1];
      d2 += q[i + 2] * rows[at + i + 2];
      d3 += q[i + 3] * rows[at + i + 3];
    }
    const s = CAP * Math.tanh((d0 + d1 + d2 + d3) / CAP_SCALE);
    scores[j] = s;
    if (s > max) max = s;
  }
  return max;
}

/** acc += p · rows[at .. at + C) (C a multiple of 4, as the CPU backend requires of n_embd). */
function addScaled(acc: Float32Array, rows: Float32Array, at: number, p: number, C: number): void {
  for (let i = 0; i < C; i += 4) {
    acc[i] += p * rows[at + i];
    acc[i + 1] += p * rows[at + i + 1];
    acc[i + 2] += p * rows[at + i + 2];
    acc[i + 3] += p * rows[at + i + 3];
  }
}

/** In-place layer norm of `a` with weight and bias at float offsets `w`, `b` of `f32`. */
function layerNorm(a: Float32Array, f32: Float32Array, w: number, b: number): void {
  const n = a.length;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += a[i];
  mean /= n;
  let varSum = 0;
  for (let i = 0; i < n; i++) varSum += (a[i] - mean) ** 2;
  const r = 1 / Math.sqrt(varSum / n + LN_EPS);
  for (let i = 0; i < n; i++) a[i] = (a[i] - mean) * r * f32[w + i] + f32[b + i];
}
