// Paces prefill chunks while other slots decode, so a long prompt costs the decoding requests at most a
// set share of their speed. A step that carries a chunk costs m times a decode-only step (m measured
// online, GPU and sampling together, so no device-specific constants); taking a chunk every k-th step
// keeps decoding at k / (k - 1 + m) of its speed, so k is the smallest whole number that holds the target.
// Without decoding slots prompts prefill at full speed: nothing to protect. A chunk still comes at least
// every MAX_INTERVAL steps, so a prompt's wait stays bounded whatever the measurements say.

/** A prompt gets a chunk at least this often however costly chunks look, so it cannot starve. */
const MAX_INTERVAL = 16;
/** Below this extra cost (ms) a chunk is not worth pacing: noise, or a backend with no real work. */
const NEGLIGIBLE_MS = 1;

export class PrefillPacer {
  private aloneMs = 0;
  private mixedMs = 0;
  private stepsSinceChunk = 0;

  /**
   * @param keep share of decode speed to keep while a prompt prefills (0 < keep < 1)
   * @param smoothing weight of the newest step time in the running averages
   */
  constructor(
    readonly keep = 0.75,
    private readonly smoothing = 0.25,
  ) {
    if (!(keep > 0 && keep < 1)) throw new RangeError(`decodeKeep must be in (0, 1), got ${keep}`);
  }

  /** The running step costs it paces by (ms), for benchmarks and diagnostics. */
  get costs(): { aloneMs: number; mixedMs: number; interval: number } {
    return { aloneMs: this.aloneMs, mixedMs: this.mixedMs, interval: this.interval() };
  }

  /** Steps per prefill chunk while slots decode (1 = every step). */
  interval(): number {
    if (this.mixedMs === 0) return 1;
    // Know both costs before pacing: take one decode-only step after the first mixed one.
    if (this.aloneMs === 0) return 2;
    if (this.mixedMs - this.aloneMs < NEGLIGIBLE_MS) return 1;
    const m = this.mixedMs / this.aloneMs;
    return Math.min(MAX_INTERVAL, Math.max(1, Math.ceil((this.keep * (m - 1)) / (1 - this.keep) - 1e-9)));
  }

  /** Whether the next step, which has decoding slots, may carry a prefill chunk. */
  chunkAllowed(): boolean {
    return this.stepsSinceChunk + 1 >= this.interval();
  }

  /** Time of a finished step that had decoding slots, and whether it carried a prefill chunk. */
  record(ms: number, carriedChunk: boolean): void {
    const avg = (old: number) => (old === 0 ? ms : old + this.smoothing * (ms - old));
    if (carriedChunk) {
      this.mixedMs = avg(this.mixedMs);
      this.stepsSinceChunk = 0;
    } else {
      this.aloneMs = avg(this.aloneMs);
      this.stepsSinceChunk++;
    }
  }
}
