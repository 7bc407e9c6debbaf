// The multiplicative repetition penalty over a sliding window (llama.cpp's repeat_penalty with
// repeat_last_n): the rows drawn in the last N steps, each counted once, have a positive logit divided
// by the penalty and a negative one multiplied, so a penalty above 1 always makes them less likely.

export class RecentTokens {
  private readonly ring: Int32Array;
  private next = 0;
  private filled = 0;
  /** Occurrences of each row in the window. */
  private readonly counts = new Map<number, number>();

  constructor(readonly window: number) {
    this.ring = new Int32Array(window);
  }

  push(row: number): void {
    if (this.filled === this.window) {
      const old = this.ring[this.next];
      const n = this.counts.get(old)! - 1;
      if (n === 0) this.counts.delete(old);
      else this.counts.set(old, n);
    } else this.filled++;
    this.ring[this.next] = row;
    this.next = (this.next + 1) % this.window;
    this.counts.set(row, (this.counts.get(row) ?? 0) + 1);
  }

  penalize(logits: Float32Array, penalty: number): void {
    for (const row of this.counts.keys()) {
      const x = logits[row];
      logits[row] = x > 0 ? x / penalty : x * penalty;
    }
  }
}
