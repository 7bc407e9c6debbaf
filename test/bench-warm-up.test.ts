// The benchmarks' timing (bench/warm-up.ts): a case's first step (its compile) and a hold before the measured steps,
// so a GPU that dropped its clock while pipelines compiled has raised it again before anything is timed.

import * as assert from 'assert';
import { CASE_HOLD_SECONDS, timeSteps } from '../bench/warm-up';

describe('bench timing: timeSteps', () => {
  it('runs the step once, holds for CASE_HOLD_SECONDS unmeasured, then measures at least minReps steps', async () => {
    const calls: number[] = [];
    const t0 = performance.now();
    const r = await timeSteps(0, 3, async () => {
      calls.push(performance.now() - t0);
      await new Promise((resolve) => setTimeout(resolve, 5));
    });
    assert.strictEqual(r.reps, 3);
    const measured = calls.slice(-3);
    // The measured steps start after the first step and the hold.
    assert.ok(measured[0] >= CASE_HOLD_SECONDS * 1000, `first measured step at ${measured[0].toFixed(0)} ms`);
    assert.ok(calls.length >= 3 + 2, `${calls.length} calls: the first, the hold's, then the measured ones`);
    // The seconds reported cover the measured steps only.
    assert.ok(r.seconds < (performance.now() - t0) / 1000 - CASE_HOLD_SECONDS + 0.05, `seconds ${r.seconds}`);
  });
});
