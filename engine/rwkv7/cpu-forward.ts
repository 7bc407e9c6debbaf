// The RWKV-7 (and 7a) forward pass on the CPU: the same batched step as the GPU runtime (runtime.ts), on the
// WebAssembly SIMD kernels, over the shared machinery of engine/cpu/cpu-forward-base.ts; and the memory layout it
// needs (planRwkv7CpuModel, for engine/cpu/cpu-runtime.ts).

import type { Checkpoint, ModelInfo } from '../types';
import type { MatmulTask, ThreadPool } from '../cpu/thread-pool';
import type { CpuKernels } from '../cpu/wasm-kernels';
import type { CpuMatrix } from '../cpu/cpu-weight-writer';
import { GrowingRows } from '../cpu/growing-rows';
import { stateFloats, stateLayout } from '../state-layout';
import { CpuDeaStep, type CpuDeaScratch } from './cpu-dea';
import { DEA_QK, deaRowFloats } from './dea-sizes';
import type { Arena } from '../cpu/arena';
import { type CpuWeights, planRwkv7Cpu } from './cpu-weights';
import { ACT_RELU_SQ, ACT_SIGMOID, ACT_TANH, allocBaseLayout, type CpuBaseLayout, CpuForwardBase, type CpuSubPass } from '../cpu/cpu-forward-base';
import type { CpuModelPlan, CpuPlanOptions } from '../cpu/cpu-runtime';
import { DEEP_EMBED_ROW } from '../model-spec';

/** RWKV-7's regions besides the common ones (addresses in bytes). */
export interface CpuLayout extends CpuBaseLayout {
  H: number;
  N: number;
  F: number;
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
  /** RWKV-7a (else 0): each token's e·s_emb_xᵀ per layer, [layer][TMAX][1024]; and the gate kernel's 64 floats. */
  se: number;
  deScratch: number;
  /** RWKV-7b (else null): the DEA step's scratch, and where its token shift sits in a layer's state. */
  dea: (CpuDeaScratch & { shiftOffset: number }) | null;
}

/** Weights and layout of an RWKV-7 or 7a model on the CPU backend. */
export async function planRwkv7CpuModel(arena: Arena, ck: Checkpoint, info: ModelInfo, o: CpuPlanOptions): Promise<CpuModelPlan<CpuLayout, CpuWeights>> {
  const { nEmbd: C, nHead: H, headSize: N, ffnDim: F, nLayer } = info;
  if (C % 8 !== 0 || N % 4 !== 0) throw new Error(`the CPU backend needs n_embd a multiple of 8 and a head size a multiple of 4 (got ${C}, ${N})`);
  if ((info.version === 'v7a' || info.version === 'v7b') && F % 4 !== 0) throw new Error(`the CPU backend needs an RWKV-7a FFN width that is a multiple of 4 (got ${F})`);
  const stateSize = stateFloats(info);
  const dea = info.version === 'v7b';
  const plan = await planRwkv7Cpu(arena, ck, info, { precision: o.precision, quantLayers: o.quantLayers });
  const weights = plan.weights;
  const T = o.TMAX;
  const loraStride = weights.maxLora;
  const layout: CpuLayout = {
    ...allocBaseLayout(arena, { C, V: weights.head.n, nLayer, slots: o.slots, TMAX: T, RMAX: o.RMAX, stateSize, stateRowFloats: dea ? deaRowFloats(info) : 0 }),
    H, N, F,
    mix: arena.allocFloats(6 * T * C),
    tm: arena.allocFloats(9 * T * C),
    lora: arena.allocFloats(4 * T * loraStride),
    loraStride,
    vfirst: arena.allocFloats(T * C),
    xx: arena.allocFloats(T * C),
    ffk: arena.allocFloats(T * F),
    se: weights.deepEmbed ? arena.allocFloats(nLayer * T * DEEP_EMBED_ROW) : 0,
    deScratch: weights.deepEmbed ? arena.allocFloats(64) : 0,
    dea: dea
      ? {
          embed: arena.allocFloats(nLayer * T * (DEA_QK + C)),
          q: arena.allocFloats(T * DEA_QK),
          kc: arena.allocFloats(T * 32),
          vc: arena.allocFloats(T * 32),
          k: arena.allocFloats(T * DEA_QK),
          v: arena.allocFloats(T * C),
          out: arena.allocFloats(T * C),
          shiftOffset: stateLayout(info)[0].dea_q.offset,
        }
      : null,
  };
  // The widest input of any matrix: the ffn value's F, the others C or a LoRA rank.
  return { pass: 'rwkv7', weights, layout, widestInput: Math.max(C, F, loraStride), write: plan.write };
}

export class Rwkv7CpuForward extends CpuForwardBase<CpuLayout, CpuWeights> {
  override readonly growing: GrowingRows | null;
  /** RWKV-7b's attention over its growing cache (cpu-dea.ts). */
  private readonly dea: CpuDeaStep | null;

  constructor(memory: WebAssembly.Memory, k: CpuKernels, pool: ThreadPool, L: CpuLayout, W: CpuWeights) {
    super(memory, k, pool, L, W);
    if (W.dea && L.dea) {
      this.growing = new GrowingRows(L.slots, L.stateRowFloats, L.maxStateRows);
      const host = {
        f32: this.f32,
        C: L.C,
        TMAX: L.TMAX,
        x: L.x,
        mm: (T: number, tasks: MatmulTask[]) => this.mm(T, tasks),
        task: (m: CpuMatrix, x: number, xs: number, y: number, ys: number, act = 0) => this.task(m, x, xs, y, ys, act),
        stateAt: (slot: number, l: number, floats: number) => this.stateAt(slot, l, floats),
      };
      this.dea = new CpuDeaStep(host, memory, W.dea, L.dea, L.dea.shiftOffset, W.wide === 1, this.growing);
    } else {
      this.growing = null;
      this.dea = null;
    }
  }

  protected layers(sp: CpuSubPass) {
    const { k, L, W } = this;
    const { C, N, H } = L;
    const T = sp.ids.length;
    const REG = L.TMAX * C;
    const regB = REG * 4;
    const de = W.deepEmbed;
    const seAt = (l: number) => L.se + l * L.TMAX * DEEP_EMBED_ROW * 4;
    // RWKV-7a: while x still holds the tokens' normalized embeddings, their e·s_emb_xᵀ for every layer's gate.
    if (de) this.mm(T, de.map((d, l) => this.task(d.sx, L.x, C, seAt(l), DEEP_EMBED_ROW)));
    const dea = this.dea;
    dea?.begin(sp);

    const mix = (m: number) => L.mix + m * regB;
    const tm = (m: number) => L.tm + m * regB;
    const lora = (m: number) => L.lora + m * L.TMAX * L.loraStride * 4;
    const ls = L.loraStride;

    W.layers.forEach((P, l) => {
      // RWKV-7b: x ← x + TimeMix(ln1(x)) + DEA(x), DEA reading the block input.
      dea?.attend(sp, l);
      this.normShift(sp, l, false, P.ln1, P.attMix, 6, L.mix, REG);
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
        segments: sp.segments.map((s) => [s.start, s.count, this.stateAt(s.slot, l, C)]),
      });
      this.pool.post(L.tm, REG, T, C, N, P.post, L.xx);
      this.mm(T, [this.task(P.o, L.xx, C, L.x, C, 0, true)]);
      dea?.addOut(T);

      this.normShift(sp, l, true, P.ln2, P.ffnMix, 1, L.mix, REG);
      this.mm(T, [this.task(P.ffnK, L.mix, C, L.ffk, L.F, ACT_RELU_SQ)]);
      if (de) k.deepEmbedGate(T, C, L.F, L.ids, de[l].table, W.wide, seAt(l), L.xn, de[l].gate, L.ffk, L.deScratch);
      this.mm(T, [this.task(P.ffnV, L.ffk, L.F, L.x, C, 0, true)]);
    });
    dea?.end(sp);
  }
}
