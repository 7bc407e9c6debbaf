// The batched RWKV-4 forward pass on WebGPU: the layers of the pass (see weights.ts for the math) on top of the
// shared slot machinery of engine/gpu/slot-runtime.ts.
//
// State per layer (engine/state-layout.ts): att_x [C], att_a [C], att_b [C], att_p [C], ffn_x [C]; all zeros is
// the fresh state (shaders/rwkv4_wkv.wgsl reads it as the reference's a = b = 0, p = -1e30).

import type { ModelInfo } from '../types';
import type { GpuContext } from '../gpu/device';
import { makeKernel } from '../gpu/kernel';
import { Recorder, SlotRuntime, type SlotRuntimeOptions } from '../gpu/slot-runtime';
import type { Rwkv4Weights } from './weights';

// Regions of `tm` (TMAX*C floats each): the time mix's k, v, sigmoid(r); the channel mix's value product in 0.
const K_ = 0, V_ = 1, R_ = 2;
const TM_REGIONS = 3;

export class Rwkv4Runtime extends SlotRuntime {
  private readonly F: number;

  constructor(gpu: GpuContext, info: ModelInfo, private readonly weights: Rwkv4Weights, opts: SlotRuntimeOptions) {
    super(gpu, info, weights.common, 5 * info.nEmbd, opts);
    this.F = info.ffnDim;
    const { TMAX, C } = this;
    // Token-shift copies: the time mix's k, v, r inputs; the channel mix uses two.
    this.scratch('mix', 3 * TMAX * C);
    this.scratch('tm', TM_REGIONS * TMAX * C);
    this.scratch('xx', TMAX * C);
  }

  protected weightObjects() {
    return this.weights.layers;
  }

  protected recordLayers(pass: Recorder, T: number, J: number) {
    const { device, C, F, TMAX, buf, weights } = this;
    const cs = { ...this.consts, F };
    const wkv = this.kernel('v4wkv', () =>
      makeKernel(device, ['rwkv4_wkv'], cs, ['uniform', 'uniform', 'read', 'read', 'rw', 'read', 'rw']),
    );
    const at = (m: number) => m * TMAX * C;
    const layersPerSubmit = 4;
    weights.layers.forEach((L, l) => {
      const key = `L${l}`;
      this.normShift(pass, `${key}:ln1`, T, J, false, l, L.ln1, L.attShift, 3, buf.mix);
      this.matmul(pass, `${key}:kvr`, L.kvr, buf.mix, buf.tm, T, [
        { xOff: at(0), yOff: at(K_) },
        { xOff: at(1), yOff: at(V_) },
        { xOff: at(2), yOff: at(R_), act: 2 },
      ]);
      pass.dispatch(wkv.pipeline, this.group(`${key}:wkv`, wkv, [buf.batch, this.layerUniforms[l], buf.jobs, buf.tm, buf.state, L.decay, buf.xx]), Math.ceil(C / 64), J);
      this.matmul(pass, `${key}:o`, L.o, buf.xx, buf.x, T, [{ xOff: 0, yOff: 0, accum: true }]);

      // The channel mix, as RWKV-5/6's.
      this.channelMix(pass, key, T, J, l, L);
      if ((l + 1) % layersPerSubmit === 0 && l + 1 < weights.layers.length) pass.submit();
    });
  }
}
