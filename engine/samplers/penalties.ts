// ai00's repetition penalty: each sampled token gets the presence penalty the first time and the
// frequency penalty added on every repeat; all penalties decay by `decay` each step, so old
// repeats are forgiven. Penalties are subtracted from the logits before softmax.
// The decay is kept as one running scale (penalty = stored * scale), so a step costs O(1), not O(tokens seen).

/** Rescale the stored values before the running scale could underflow. */
const RENORMALIZE_BELOW = 1e-200;

export class RepetitionPenalty {
  private readonly stored = new Map<number, number>();
  private scale = 1;

  constructor(
    private readonly presence: number,
    private readonly frequency: number,
    private readonly decay: number,
  ) {}

  get active(): boolean {
    return this.presence !== 0 || this.frequency !== 0;
  }

  /** Rows with a penalty so far. */
  get size(): number {
    return this.stored.size;
  }

  /** Calls fn with each penalized row and its current penalty. */
  forEach(fn: (row: number, penalty: number) => void): void {
    const scale = this.scale;
    for (const [row, value] of this.stored) fn(row, value * scale);
  }

  apply(logits: Float32Array): void {
    const scale = this.scale;
    for (const [row, value] of this.stored) logits[row] -= value * scale;
  }

  record(row: number): void {
    if (!this.active) return;
    this.scale *= this.decay;
    if (this.scale < RENORMALIZE_BELOW) {
      for (const [key, value] of this.stored) this.stored.set(key, value * this.scale);
      this.scale = 1;
    }
    // decay = 0 forgives everything at once; rows seen keep a zero penalty (a repeat adds the frequency term).
    if (this.scale === 0) {
      for (const key of this.stored.keys()) this.stored.set(key, 0);
      this.scale = 1;
    }
    const existing = this.stored.get(row);
    const add = existing === undefined ? this.presence : this.frequency;
    this.stored.set(row, (existing ?? 0) + add / this.scale);
  }
}
