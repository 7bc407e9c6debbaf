// ai00's repetition penalty: each sampled token gets the presence penalty the first time and the
// frequency penalty added on every repeat; all penalties decay by `decay` each step, so old
// repeats are forgiven. Penalties are subtracted from the logits before softmax.

export class RepetitionPenalty {
  private readonly penalties = new Map<number, number>();

  constructor(
    private readonly presence: number,
    private readonly frequency: number,
    private readonly decay: number,
  ) {}

  get active(): boolean {
    return this.presence !== 0 || this.frequency !== 0;
  }

  /** Current penalty per row (subtracted from the logits). */
  get entries(): ReadonlyMap<number, number> {
    return this.penalties;
  }

  apply(logits: Float32Array): void {
    for (const [row, penalty] of this.penalties) logits[row] -= penalty;
  }

  record(row: number): void {
    if (!this.active) return;
    for (const [key, penalty] of this.penalties) this.penalties.set(key, penalty * this.decay);
    const existing = this.penalties.get(row);
    this.penalties.set(row, existing === undefined ? this.presence : existing + this.frequency);
  }
}
