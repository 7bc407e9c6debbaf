// RWKV-7b's DEA attention sizes, fixed in the reference (../shared/golden/README.md "RWKV-7a and RWKV-7b"), and what
// one cached token costs: the state of a 7b slot grows by one row per token (engine/state-shape.ts).

import type { ModelInfo } from '../types';

/** DEA's query/key width. */
export const DEA_QK = 256;

/**
 * Floats one token adds to a 7b slot's state: per layer its final key K [256] and value V [C] (after token shift
 * and layer norm, so the attention never recomputes them), token-major so a row is appended whole.
 */
export function deaRowFloats(info: Pick<ModelInfo, 'nLayer' | 'nEmbd'>): number {
  return info.nLayer * (DEA_QK + info.nEmbd);
}
