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
