// Test helper: submits a bare prefill to an engine's scheduler from the zero state and resolves with the logits
// after the prompt and how many of its tokens came from the prefix cache.

import type { RwkvEngine } from '../engine/engine';
import type { SlotTask } from '../engine/slot-task';

export function prefillLogits(e: RwkvEngine, prompt: number[]): Promise<{ logits: Float32Array; cached: number }> {
  return new Promise((resolve, reject) => {
    let cached = -1;
    const task: SlotTask = {
      initial: (e as unknown as { states: { zero: SlotTask['initial'] } }).states.zero,
      prompt,
      onStart: (i) => (cached = i.cachedTokens),
      onPrefilled: (l) => (resolve({ logits: l.slice(), cached }), null),
      onFed: () => null,
      onAbort: () => reject(new Error('aborted')),
      onError: reject,
    };
    e.scheduler.submit(task);
  });
}
