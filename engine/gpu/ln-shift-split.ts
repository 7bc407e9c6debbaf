// How many workgroups share one token's layer norm + token shift (shaders/ln_shift.wgsl, SPLIT). A decode step
// has one token per job, so with one workgroup a token the norm of a batch-1 step ran on a single compute unit
// for its whole length, a latency-bound link in the step's chain of dependent dispatches. Each workgroup of a
// split computes the row statistics itself (C reads, cheap) and writes its slice of the columns. Large batches
// and prefill chunks already have a workgroup per token on every compute unit, and keep one.

/** The largest split tried: slices of at least 256 columns, one per lane of a 256-lane workgroup. */
const MIN_SLICE = 256;
/** Splits stop once a step has this many norm workgroups. */
const TARGET_WORKGROUPS = 32;

/** `RWKV_LN_SPLIT=1` turns the split off (benchmarks compare); read once. */
const forced = (() => {
  const v = process.env.RWKV_LN_SPLIT;
  if (v === undefined || v === '') return null;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`RWKV_LN_SPLIT=${v}: give a whole number from 1 to 64`);
  return n;
})();

/** Workgroups per token for a norm over C columns in a sub-pass of T tokens. */
export function lnShiftSplit(tokens: number, C: number): number {
  const most = Math.max(1, Math.floor(C / MIN_SLICE));
  if (forced !== null) return Math.min(forced, most);
  return Math.max(1, Math.min(most, Math.ceil(TARGET_WORKGROUPS / tokens)));
}
