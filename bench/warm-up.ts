// Steady work before a GPU benchmark's first figure. On the H200 a step's own GPU time falls for about a second
// after a model's upload (clocks rising: the first 25 batch-1 steps of a 1.5B model took 8.2 ms of GPU time each,
// 2.3 ms after 50; bench section ablation, bench/RESULTS.md "Where a step goes"), so figures taken straight after a
// load measured the clocks, not the kernels. The baselines warm up too.

/** Seconds of steps run before measuring. */
export const WARM_UP_SECONDS = 2;

/** Runs `step` for `seconds`. */
export async function warmUp(step: () => Promise<unknown>, seconds = WARM_UP_SECONDS): Promise<void> {
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) await step();
}

/**
 * Seconds of a case's own steps run between its first step and its measured ones. The first step of a new shape
 * compiles its pipelines, seconds of CPU work with the GPU idle, and the H200 drops its SM clock from 1,980 to its
 * idle 345 MHz within about a second of idling and takes about as long to raise it again (bench/device/clocks.sh,
 * session 12): measured straight after the compile, the steps ran at the idle clock (a 1.5B batch-64 step's kernels
 * took 22.6 ms in one profile and 10.5 ms in the next process, the same code).
 */
export const CASE_HOLD_SECONDS = 0.5;

/**
 * `step` once (pipelines, caches), then for CASE_HOLD_SECONDS unmeasured, then at least `minReps` times and
 * `minSeconds`: the measured steps and their seconds.
 */
export async function timeSteps(minSeconds: number, minReps: number, step: () => Promise<unknown>): Promise<{ reps: number; seconds: number }> {
  await step();
  await warmUp(step, CASE_HOLD_SECONDS);
  const t0 = performance.now();
  let reps = 0;
  while (reps < minReps || performance.now() - t0 < minSeconds * 1000) {
    await step();
    reps++;
  }
  return { reps, seconds: (performance.now() - t0) / 1000 };
}
