// The RWKV-6 and RWKV-5.2 forward pass on the CPU: the layers of engine/rwkv6/runtime.ts (weights.ts has the math)
// on the WebAssembly SIMD kernels, over the shared machinery of engine/cpu/cpu-forward-base.ts; and the memory
// layout it needs (finchCpuPlanner, for engine/cpu/cpu-runtime.ts). RWKV-5 weights have no `ddlerp`: the token
// shift writes the four inputs directly and the decay is static.
//
// State per layer, as RWKV-7's: att_x [C], att_kv [H, N(value), N(key)], ffn_x [C].

import type { Checkpoint, ModelInfo } from '../types';
import type { Arena } from '../cpu/arena';
import { ACT_TANH, allocBaseLayout, type CpuBaseLayout, CpuForwardBase, type CpuSubPass } from '../cpu/cpu-forward-base';
import type { CpuModelPlan, CpuPlanOptions, CpuPlanner } from '../cpu/cpu-runtime';
import { CpuWeightWriter } from '../cpu/cpu-weight-writer';
import type { FinchCpuWeights } from './cpu-weights';

// Regions of `tm` (kernels.ts documents them too): r, k, v, g; the decay LoRA's output; the WKV output; the five
// token-shift LoRA outputs (w, k, v, r, g); from MIX_, the token shift's outputs: RWKV-6 xxx and prev, then the
// mixed inputs w, k, v, r, g; RWKV-5 its inputs r, k, v, g. The channel mix reuses MIX_ and MIX_+1 for its
// inputs, R_ for its receptance and K_ for its value product.
const R_ = 0, K_ = 1, V_ = 2, G_ = 3, W_ = 4, ML_ = 6, MIX_ = 11;
const V6_INPUT = { w: 13, k: 14, v: 15, r: 16, g: 17 };
const V5_INPUT = { r: 11, k: 12, v: 13, g: 14 };

export interface FinchCpuLayout extends CpuBaseLayout {
  H: number;
  N: number;
  F: number;
  /** The time-mix regions, `region` (TMAX·C) floats each. */
  tm: number;
  region: number;
  /** RWKV-6: the token-shift LoRA's hidden layer [TMAX, mixStride] and the decay LoRA's [TMAX, decayStride]. */
  mixHidden: number;
  mixStride: number;
  decayHidden: number;
  decayStride: number;
  /** The output matrix's input [TMAX, C]; the channel mix's hidden layer [TMAX, F]. */
  xx: number;
  ffk: number;
}

/** The planner of RWKV-6 (planRwkv6Cpu) or RWKV-5.2 (planRwkv5Cpu) weights on this pass. */
export function finchCpuPlanner(planWeights: (w: CpuWeightWriter, info: ModelInfo) => Promise<FinchCpuWeights>): CpuPlanner {
  return async (arena: Arena, ck: Checkpoint, info: ModelInfo, o: CpuPlanOptions): Promise<CpuModelPlan<FinchCpuLayout, FinchCpuWeights>> => {
    const { nEmbd: C, nHead: H, headSize: N, ffnDim: F, nLayer } = info;
    if (C % 8 !== 0 || N % 4 !== 0) throw new Error(`the CPU backend needs n_embd a multiple of 8 and a head size a multiple of 4 (got ${C}, ${N})`);
    const w = new CpuWeightWriter(arena, ck, { precision: o.precision, quantLayers: o.quantLayers }, C);
    const weights = await planWeights(w, info);
    const T = o.TMAX;
    const regions = weights.version === 'v6' ? V6_INPUT.g + 1 : V5_INPUT.g + 1;
    const layout: FinchCpuLayout = {
      ...allocBaseLayout(arena, { C, V: weights.head.n, nLayer, slots: o.slots, TMAX: T, RMAX: o.RMAX, stateSize: nLayer * (2 * C + H * N * N) }),
      H, N, F,
      tm: arena.allocFloats(regions * T * C),
      region: T * C,
      mixHidden: arena.allocFloats(T * weights.mixWidth),
      mixStride: weights.mixWidth,
      decayHidden: arena.allocFloats(T * weights.decayWidth),
      decayStride: weights.decayWidth,
      xx: arena.allocFloats(T * C),
      ffk: arena.allocFloats(T * F),
    };
    return { pass: 'rwkv6', weights, layout, widestInput: Math.max(C, F, weights.mixWidth, weights.decayWidth), write: (m) => w.write(m) };
  };
}

export class FinchCpuForward extends CpuForwardBase<FinchCpuLayout, FinchCpuWeights> {
  protected layers(sp: CpuSubPass) {
    const { L, W, pool } = this;
    const { C, N, H, region } = L;
    const T = sp.ids.length;
    const at = (m: number) => L.tm + m * region * 4;
    W.layers.forEach((P, l) => {
      const dd = P.ddlerp;
      this.normShift(sp, l, false, P.ln1, P.attShift, dd ? 2 : 4, at(MIX_), region);
      if (dd) {
        // m_i = tanh(xxx @ maa_w1)[block i] @ maa_w2[i], then the five mixed inputs, then the decay's LoRA.
        this.mm(T, [this.task(dd.mix1, at(MIX_), C, L.mixHidden, L.mixStride, ACT_TANH)]);
        this.mm(T, dd.mix2.map((m, i) => this.task(m, L.mixHidden + i * m.k * 4, L.mixStride, at(ML_ + i), C)));
        pool.finchMix(L.tm, region, T, C, N, dd.maa, L.xn);
        const v6 = V6_INPUT;
        this.mm(T, [
          this.task(dd.decay1, at(v6.w), C, L.decayHidden, L.decayStride, ACT_TANH),
          this.task(P.r, at(v6.r), C, at(R_), C),
          this.task(P.k, at(v6.k), C, at(K_), C),
          this.task(P.v, at(v6.v), C, at(V_), C),
          this.task(P.g, at(v6.g), C, at(G_), C),
        ]);
        this.mm(T, [this.task(dd.decay2, L.decayHidden, L.decayStride, at(W_), C)]);
      } else {
        const v5 = V5_INPUT;
        this.mm(T, [
          this.task(P.r, at(v5.r), C, at(R_), C),
          this.task(P.k, at(v5.k), C, at(K_), C),
          this.task(P.v, at(v5.v), C, at(V_), C),
          this.task(P.g, at(v5.g), C, at(G_), C),
        ]);
      }
      pool.finchWkv({
        tm: L.tm,
        region,
        C,
        N,
        H,
        p: P.wkv,
        dynamic: dd !== undefined,
        segments: sp.segments.map((s) => [s.start, s.count, this.stateAt(s.slot, l, C)]),
      });
      pool.finchPost(L.tm, region, T, C, N, P.lnx, L.xx);
      this.mm(T, [this.task(P.o, L.xx, C, L.x, C, 0, true)]);
      this.channelMix(sp, l, P, { inputs: at(MIX_), region, hidden: L.ffk, F: L.F, r: at(R_), v: at(K_) });
    });
  }
}
