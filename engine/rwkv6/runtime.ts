// The batched RWKV-6 (and RWKV-5.2) forward pass on WebGPU: the layers of the pass (see weights.ts for the
// math) on top of the shared slot machinery of engine/gpu/slot-runtime.ts. RWKV-5 weights have no `ddlerp`:
// the token shift writes the four inputs directly and the decay is static.
//
// State per layer, as RWKV-7's: att_x [C], att_kv [H, N(value), N(key)], ffn_x [C].

import { withWgSum } from '../gpu/wg-sum';
import type { ModelInfo } from '../types';
import type { GpuContext } from '../gpu/device';
import { makeKernel } from '../gpu/kernel';
import { Recorder, SlotRuntime, type SlotRuntimeOptions } from '../gpu/slot-runtime';
import type { FinchWeights } from './weights';

// tm regions (shaders/rwkv6_common.wgsl).
const R_ = 0, K_ = 1, V_ = 2, G_ = 3, W_ = 4, ML_ = 6;
const TM_REGIONS = 11;

export class Rwkv6Runtime extends SlotRuntime {
  private readonly F: number;
  private readonly dynamic: boolean;

  constructor(gpu: GpuContext, info: ModelInfo, private readonly weights: FinchWeights, opts: SlotRuntimeOptions) {
    super(gpu, info, weights.common, 2 * info.nEmbd + info.nHead * info.headSize * info.headSize, opts);
    this.F = info.ffnDim;
    this.dynamic = weights.version === 'v6';
    const { TMAX, C } = this;
    // Token-shift copies: v6 xxx, prev, then w, k, v, r, g; v5 r, k, v, g. The channel mix uses two.
    this.scratch('mix', (this.dynamic ? 7 : 4) * TMAX * C);
    this.scratch('tm', TM_REGIONS * TMAX * C);
    this.scratch('lora', Math.max(1, 5 * TMAX * weights.loraWidth));
    this.scratch('xx', TMAX * C);
  }

  protected weightObjects() {
    return this.weights.layers;
  }

  protected recordLayers(pass: Recorder, T: number, J: number) {
    const { device, C, F, TMAX, buf, weights } = this;
    const H = this.info.nHead;
    const cs = { ...this.consts, F, DYNAMIC: this.dynamic };
    const REG = TMAX * C;
    const LREG = TMAX * weights.loraWidth;
    const common = ['rwkv6_common'];
    const mixK = this.kernel('v6mix', () =>
      makeKernel(device, [...common, 'rwkv6_mix'], cs, ['uniform', 'read', 'read', 'read', 'rw']),
    );
    const wkv = this.kernel('v6wkv', () =>
      makeKernel(device, [...common, 'wkv_bindings', 'rwkv6_wkv'], cs, ['uniform', 'uniform', 'read', 'rw', 'rw', 'read']),
    );
    const post = this.kernel('v6post', () =>
      makeKernel(device, ...withWgSum(this.gpu, ['wg_sum', ...common, 'rwkv6_post'], { ...cs, WG: cs.N }), ['uniform', 'read', 'read', 'rw']),
    );
    const at = (m: number) => m * REG;
    // Where the time mix's inputs are in `mix`.
    const input = this.dynamic ? { w: 2, k: 3, v: 4, r: 5, g: 6 } : { r: 0, k: 1, v: 2, g: 3, w: -1 };
    const layersPerSubmit = 4;
    weights.layers.forEach((L, l) => {
      const key = `L${l}`;
      this.normShift(pass, `${key}:ln1`, T, J, false, l, L.ln1, L.attShift, this.dynamic ? 2 : 4, buf.mix);
      const dd = L.ddlerp;
      if (dd) {
        // m_i = tanh(xxx @ maa_w1)[block i] @ maa_w2[i], then the five mixed inputs.
        const lora1 = (g: 0 | 1) =>
          dd.mixLora1[g].segs.map((_, s) => ({ xOff: at(0), yOff: (g * 4 + s) * LREG, act: 1 }));
        const lora2 = (g: 0 | 1) =>
          dd.mixLora2[g].segs.map((_, s) => ({ xOff: (g * 4 + s) * LREG, yOff: at(ML_ + g * 4 + s) }));
        this.matmul(pass, `${key}:ml1a`, dd.mixLora1[0], buf.mix, buf.lora, T, lora1(0));
        this.matmul(pass, `${key}:ml1b`, dd.mixLora1[1], buf.mix, buf.lora, T, lora1(1));
        this.matmul(pass, `${key}:ml2a`, dd.mixLora2[0], buf.lora, buf.tm, T, lora2(0));
        this.matmul(pass, `${key}:ml2b`, dd.mixLora2[1], buf.lora, buf.tm, T, lora2(1));
        pass.dispatch(mixK.pipeline, this.group(`${key}:mix`, mixK, [buf.batch, buf.xn, buf.tm, dd.maa, buf.mix]), Math.ceil(C / 64), T);
        this.matmul(pass, `${key}:dl1`, dd.decayLora1, buf.mix, buf.lora, T, [{ xOff: at(input.w), yOff: 0, act: 1 }]);
        this.matmul(pass, `${key}:dl2`, dd.decayLora2, buf.lora, buf.tm, T, [{ xOff: 0, yOff: at(W_) }]);
      }
      this.matmul(pass, `${key}:rkvg`, L.rkvg, buf.mix, buf.tm, T, [
        { xOff: at(input.r), yOff: at(R_) },
        { xOff: at(input.k), yOff: at(K_) },
        { xOff: at(input.v), yOff: at(V_) },
        { xOff: at(input.g), yOff: at(G_) },
      ]);
      pass.dispatch(wkv.pipeline, this.group(`${key}:wkv`, wkv, [buf.batch, this.layerUniforms[l], buf.jobs, buf.tm, buf.state, L.wkv]), H, J);
      pass.dispatch(post.pipeline, this.group(`${key}:post`, post, [buf.batch, buf.tm, L.lnx, buf.xx]), H, T);
      this.matmul(pass, `${key}:o`, L.o, buf.xx, buf.x, T, [{ xOff: 0, yOff: 0, accum: true }]);

      this.channelMix(pass, key, T, J, l, L);
      if ((l + 1) % layersPerSubmit === 0 && l + 1 < weights.layers.length) pass.submit();
    });
  }
}
