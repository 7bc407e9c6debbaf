// Room for the tiled products' f16 inputs (mm_sgtile_x.wgsl): the largest group's padded rows × its inputs
// summed over its matrices, found by walking the model's weights, so no group can outgrow the buffer.

import { tiledInputHalves } from './matmul';
import type { MatrixGroup, ModelWeights } from './weights';

function isGroup(v: unknown): v is MatrixGroup {
  return typeof v === 'object' && v !== null && Array.isArray((v as MatrixGroup).segs) && 'buffer' in v && 'format' in v;
}

/** Every matrix group reachable from the weights (plain objects and arrays only; GPU objects are not walked). */
export function matrixGroupsOf(weights: ModelWeights): MatrixGroup[] {
  const out: MatrixGroup[] = [];
  const seen = new Set<object>();
  const walk = (v: unknown): void => {
    if (typeof v !== 'object' || v === null || seen.has(v)) return;
    seen.add(v);
    if (isGroup(v)) {
      out.push(v);
      return;
    }
    if (Array.isArray(v)) v.forEach(walk);
    else if (Object.getPrototypeOf(v) === Object.prototype) Object.values(v).forEach(walk);
  };
  walk(weights);
  return out;
}

/** A group's matrices can be tiled: f16, and every input width a multiple of 16 (whole 16×16 blocks). */
export function tileableGroup(g: MatrixGroup): boolean {
  return g.format === 'f16' && g.segs.every((s) => s.k % 16 === 0);
}

/** Halves the tiled inputs of any tileable group need at `maxRows` rows, padded to `tileTokens` (0 when none is tileable). */
export function tiledInputCapacity(weights: ModelWeights, maxRows: number, tileTokens?: number): number {
  let most = 0;
  for (const g of matrixGroupsOf(weights)) {
    if (tileableGroup(g)) most = Math.max(most, tiledInputHalves(g.segs.map((s) => s.k), maxRows, tileTokens));
  }
  return most;
}
