// RWKV-7b's DEA attention weights laid out for the CPU backend (the tensors of model-spec.ts `deaTensors`, the math
// of ../shared/golden/README.md "RWKV-7a and RWKV-7b"). The projections are kernel matrices; the per-token tables
// k_emb / v_emb stay as stored (f16, f32 with f32 weights) and only the rows of the tokens run are read, with
// e·k_emb_xᵀ and e·v_emb_xᵀ computed per token as the 7a gate does for SE (no V×256 / V×C merge at load).

import type { ModelInfo } from '../types';
import { toF16Bits, toF32 } from '../loader/dtype';
import type { CpuMatrix, CpuWeightWriter } from '../cpu/cpu-weight-writer';
import { MAX_PAGES } from '../cpu/wasm-kernels';

import { DEA_QK } from './dea-sizes';
import { packDeaVectors } from './dea-vectors';

/** One layer's DEA weights (addresses in bytes). */
export interface CpuDeaLayer {
  /** q = qq·x [256]. */
  qq: CpuMatrix;
  /** kc = x·k1, vc = x·v1 [32] (stored [in, out]). */
  k1: CpuMatrix;
  v1: CpuMatrix;
  /** kc·k2 [256], tanh(vc·v2) [C]. */
  k2: CpuMatrix;
  v2: CpuMatrix;
  /** e·k_emb_xᵀ [256] and e·v_emb_xᵀ [C] of a token's normalized embedding e. */
  kx: CpuMatrix;
  vx: CpuMatrix;
  /** k_emb.weight [V, 256] and v_emb.weight [V, C], f16 bits (f32 when `wide`). */
  kTable: number;
  vTable: number;
  /** f32: x_q [256], x_k [256], x_v [C], lnq w, b [256 each], lnk w, b [256 each], lnv w, b [C each]. */
  vecs: number;
}

/** Bytes the DEA tables of every layer take on the CPU backend (refused early when they alone cannot fit). */
export function deaTableBytes(info: ModelInfo, wide: boolean): number {
  return info.nLayer * info.vocabSize * (DEA_QK + info.nEmbd) * (wide ? 4 : 2);
}

export async function planDeaLayers(w: CpuWeightWriter, info: ModelInfo, wide: boolean): Promise<CpuDeaLayer[]> {
  const C = info.nEmbd;
  const tables = deaTableBytes(info, wide);
  if (tables > MAX_PAGES * 65536)
    throw new RangeError(`the RWKV-7b DEA tables need ${tables} bytes, more than the CPU backend's 4 GiB of WebAssembly memory${wide ? '; try precision f16' : ''}`);
  const layers: CpuDeaLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const q = `blocks.${l}.qkv.`;
    const vecs = packDeaVectors(l, C, (name) => w.vals(name));
    const table = (name: string) => {
      const t = w.tensor(q + name);
      return w.place(wide ? toF32(t) : toF16Bits(t));
    };
    layers.push({
      qq: await w.matrix(w.linear(`${q}qq.weight`)),
      k1: await w.matrix(w.lora(`${q}k1`)),
      v1: await w.matrix(w.lora(`${q}v1`)),
      k2: await w.matrix(w.lora(`${q}k2`)),
      v2: await w.matrix(w.lora(`${q}v2`)),
      kx: await w.matrix(w.linear(`${q}k_emb_x.weight`)),
      vx: await w.matrix(w.linear(`${q}v_emb_x.weight`)),
      kTable: table('k_emb.weight'),
      vTable: table('v_emb.weight'),
      vecs: w.place(vecs),
    });
  }
  return layers;
}
