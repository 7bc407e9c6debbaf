// RWKV-7b's per-layer DEA vectors (token-shift mixes and layer-norm weights) packed into one f32 array, the same
// layout on both backends: x_q [256], x_k [256], x_v [C], lnq w, b [256 each], lnk w, b [256 each], lnv w, b [C each].

import { DEA_QK } from './dea-sizes';

/** Offsets (floats) of the parts of a layer's packed DEA vectors. */
export function deaVecOffsets(C: number) {
  const Q = DEA_QK;
  return { xq: 0, xk: Q, xv: 2 * Q, lnqW: 2 * Q + C, lnqB: 3 * Q + C, lnkW: 4 * Q + C, lnkB: 5 * Q + C, lnvW: 6 * Q + C, lnvB: 6 * Q + 2 * C, total: 6 * Q + 3 * C };
}

/** Layer `l`'s DEA vectors read through `vals` (a tensor's values by name), each checked for its length. */
export function packDeaVectors(l: number, C: number, vals: (name: string) => ArrayLike<number>): Float32Array {
  const q = `blocks.${l}.qkv.`;
  const o = deaVecOffsets(C);
  const vecs = new Float32Array(o.total);
  const put = (name: string, at: number, n: number) => {
    const v = vals(q + name);
    if (v.length !== n) throw new RangeError(`${q}${name} has ${v.length} values, RWKV-7b needs ${n}`);
    vecs.set(v, at);
  };
  put('x_q', o.xq, DEA_QK);
  put('x_k', o.xk, DEA_QK);
  put('x_v', o.xv, C);
  put('lnq.weight', o.lnqW, DEA_QK);
  put('lnq.bias', o.lnqB, DEA_QK);
  put('lnk.weight', o.lnkW, DEA_QK);
  put('lnk.bias', o.lnkB, DEA_QK);
  put('lnv.weight', o.lnvW, C);
  put('lnv.bias', o.lnvB, C);
  return vecs;
}
