// The checks every backend makes of one job of a run() call before anything runs: the slot exists and appears once,
// the tokens are inside the vocabulary, and the output and logit adjustment fit together. One place, so the CPU
// and GPU backends refuse the same calls with the same messages.

import type { LogitAdjust, SlotJob } from './types';

/**
 * Throws naming job `i` when it is malformed. `seen` collects the slots of the call so far; `checkAdjust` checks
 * an output-'top' job's logit adjustment (each backend bounds it by what its top-logits reduction holds).
 */
export function checkJob(
  j: SlotJob,
  i: number,
  slots: number,
  vocab: number,
  seen: Set<number>,
  checkAdjust: (adjust: LogitAdjust | undefined, job: number) => void,
): void {
  if (!Number.isInteger(j.slot) || j.slot < 0 || j.slot >= slots) throw new RangeError(`job ${i}: slot ${j.slot} is out of range 0..${slots - 1}`);
  if (seen.has(j.slot)) throw new Error(`job ${i}: slot ${j.slot} appears twice in one call`);
  seen.add(j.slot);
  if (j.tokens.length === 0 && j.output !== 'none') throw new Error(`job ${i}: no tokens but output '${j.output}'`);
  if (j.output === 'top') checkAdjust(j.adjust, i);
  else if (j.adjust) throw new Error(`job ${i}: adjust is for output 'top' only`);
  for (let t = 0; t < j.tokens.length; t++) {
    const id = j.tokens[t];
    if (!Number.isInteger(id) || id < 0 || id >= vocab)
      throw new RangeError(`job ${i}: token ${id} at position ${t} is outside the model's vocabulary 0..${vocab - 1}`);
  }
}
