// The RWKV-4 forward pass on the CPU: the layers of engine/rwkv4/runtime.ts (weights.ts has the math) on the
// WebAssembly SIMD kernels, over the shared machinery of engine/cpu/cpu-forward-base.ts; and the memory layout it
// needs (planRwkv4CpuModel, for engine/cpu/cpu-runtime.ts).
//
// State per layer (engine/state-layout.ts): att_x [C], att_a [C], att_b [C], att_p [C], ffn_x [C]; all zeros is
// the fresh state (kernels.ts `rwkv4Wkv` reads it as the reference's a = b = 0, p = -1e30).

import type { Checkpoint, ModelInfo } from '../types';
import type { Arena } from '../cpu/arena';
import { ACT_SIGMOID, allocBaseLayout, type CpuBaseLayout, CpuForwardBase, type CpuSubPass } from '../cpu/cpu-forward-base';
import type { CpuModelPlan, CpuPlanOptions } from '../cpu/cpu-runtime';
import { CpuWeightWriter } from '../cpu/cpu-weight-writer';
import { planRwkv4Cpu, type Rwkv4CpuWeights } from './cpu-weights';

// Regions of `tm`: the time mix's k, v, sigmoid(r) (kernels.ts `rwkv4Wkv` reads them there), then the token
// shift's three inputs k, v, r. The channel mix reuses MIX_ and MIX_+1 for its inputs, R_ for its receptance and
// K_ for its value product.
const K_ = 0, V_ = 1, R_ = 2, MIX_ = 3;
const REGIONS = 6;

export interface Rwkv4CpuLayout extends CpuBaseLayout {
  F: number;
  /** The time-mix regions, `region` (TMAX·C) floats each. */
  tm: number;
  region: number;
  /** The output matrix's input [TMAX, C]; the channel mix's hidden layer [TMAX, F]. */
  xx: number;
  ffk: number;
}

export async function planRwkv4CpuModel(arena: Arena, ck: Checkpoint, info: ModelInfo, o: CpuPlanOptions): Promise<CpuModelPlan<Rwkv4CpuLayout, Rwkv4CpuWeights>> {
  const { nEmbd: C, ffnDim: F, nLayer } = info;
  if (C % 8 !== 0) throw new Error(`the CPU backend needs n_embd a multiple of 8 (got ${C})`);
  const w = new CpuWeightWriter(arena, ck, { precision: o.precision, quantLayers: o.quantLayers }, C);
  const weights = await planRwkv4Cpu(w, info);
  const T = o.TMAX;
  const layout: Rwkv4CpuLayout = {
    ...allocBaseLayout(arena, { C, V: weights.head.n, nLayer, slots: o.slots, TMAX: T, RMAX: o.RMAX, stateSize: nLayer * 5 * C }),
    F,
    tm: arena.allocFloats(REGIONS * T * C),
    region: T * C,
    xx: arena.allocFloats(T * C),
    ffk: arena.allocFloats(T * F),
  };
  return { pass: 'rwkv4', weights, layout, widestInput: Math.max(C, F), write: (m) => w.write(m) };
}

export class Rwkv4CpuForward extends CpuForwardBase<Rwkv4CpuLayout, Rwkv4CpuWeights> {
  protected layers(sp: CpuSubPass) {
    const { L, W } = this;
    const { C, region } = L;
    const T = sp.ids.length;
    const at = (m: number) => L.tm + m * region * 4;
    W.layers.forEach((P, l) => {
      this.normShift(sp, l, false, P.ln1, P.attShift, 3, at(MIX_), region);
      this.mm(T, [
        this.task(P.k, at(MIX_), C, at(K_), C),
        this.task(P.v, at(MIX_ + 1), C, at(V_), C),
        this.task(P.r, at(MIX_ + 2), C, at(R_), C, ACT_SIGMOID),
      ]);
      // The slot's att_a, b, p follow att_x.
      this.pool.rwkv4Wkv({ tm: L.tm, region, C, decay: P.decay, out: L.xx, segments: sp.segments.map((s) => [s.start, s.count, this.stateAt(s.slot, l, C)]) });
      this.mm(T, [this.task(P.o, L.xx, C, L.x, C, 0, true)]);
      this.channelMix(sp, l, P, { inputs: at(MIX_), region, hidden: L.ffk, F: L.F, r: at(R_), v: at(K_) });
    });
  }
}
