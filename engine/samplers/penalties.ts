// ai00's repetition penalty: each sampled token gets the presence penalty the first time and the
// frequency penalty added on every repeat; all penalties decay by `decay` each step, so old
// repeats are forgiven. Penalties are subtracted from the logits before softmax.
// The decay is kept as one running scale (penalty = stored * scale), so a step costs O(1), not O(tokens seen).

/** Rescale the stored values before the running scale could underflow. */
const RENORMALIZE_BELOW = 1e-200;

export class RepetitionPenalty {
  /** Penalized rows and their stored values in parallel arrays: a decode step reads all of them, and a
   *  typed-array loop costs a fraction of a Map walk (on the H200 a Map walk grew to 0.45 ms a step for
   *  8 requests after a thousand tokens each). */
  private rows = new Int32Array(64);
  private stored = new Float64Array(64);
  private count = 0;
  private readonly position = new Map<number, number>();
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
    return this.count;
  }

  /** Where `row` is in `write`'s output, -1 when it has no penalty. */
  indexOf(row: number): number {
    return this.position.get(row) ?? -1;
  }

  /** Calls fn with each penalized row and its current penalty. */
  forEach(fn: (row: number, penalty: number) => void): void {
    for (let i = 0; i < this.count; i++) fn(this.rows[i], this.stored[i] * this.scale);
  }

  /** Writes the rows and their negated penalties (the logit deltas) from index 0 on. */
  write(rows: Int32Array, deltas: Float32Array): void {
    const scale = -this.scale;
    rows.set(this.rows.subarray(0, this.count));
    for (let i = 0; i < this.count; i++) deltas[i] = this.stored[i] * scale;
  }

  apply(logits: Float32Array): void {
    const scale = this.scale;
    for (let i = 0; i < this.count; i++) logits[this.rows[i]] -= this.stored[i] * scale;
  }

  record(row: number): void {
    if (!this.active) return;
    this.scale *= this.decay;
    if (this.scale < RENORMALIZE_BELOW) {
      for (let i = 0; i < this.count; i++) this.stored[i] *= this.scale;
      this.scale = 1;
    }
    // decay = 0 forgives everything at once; rows seen keep a zero penalty (a repeat adds the frequency term).
    if (this.scale === 0) {
      this.stored.fill(0, 0, this.count);
      this.scale = 1;
    }
    let at = this.position.get(row);
    const add = at === undefined ? this.presence : this.frequency;
    if (at === undefined) {
      if (this.count === this.rows.length) this.grow();
      at = this.count++;
      this.position.set(row, at);
      this.rows[at] = row;
      this.stored[at] = 0;
    }
    this.stored[at] += add / this.scale;
  }

  private grow(): void {
    const rows = new Int32Array(this.rows.length * 2);
    const stored = new Float64Array(this.stored.length * 2);
    rows.set(this.rows);
    stored.set(this.stored);
    this.rows = rows;
    this.stored = stored;
  }
}
