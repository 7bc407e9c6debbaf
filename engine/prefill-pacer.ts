// Paces prefill chunks while other slots decode, so a long prompt costs the decoding requests at most a
// set share of their speed. Three step costs are measured online (GPU and sampling together, so no
// device-specific constants): a decode-only step while no prompt waits (q, the speed to protect), a
// decode-only step while one does (b: measured on the H200 at 15% above q, as chunk steps disturb the steps
// around them), and a step carrying a chunk (x). Taking a chunk every k-th step decodes at
// k·q / ((k - 1)·b + x) of the undisturbed speed, so k is the smallest whole number that holds the target.
// Costs are kept per chunk size class (powers of two): a 16-token prompt tail and a 128-token chunk of a long
// prompt cost very different amounts, and pacing one by the other's cost either stalls short prompts or lets
// the first chunks of a long one through unpaced. Without decoding slots prompts prefill at full speed:
// nothing to protect. A chunk still comes at least every MAX_INTERVAL steps, so a prompt cannot starve.

/** A prompt gets a chunk at least this often however costly chunks look, so it cannot starve. */
const MAX_INTERVAL = 16;
/** Below this extra cost (ms) a chunk is not worth pacing: noise, or a backend with no real work. */
const NEGLIGIBLE_MS = 1;

/**
 * Median of the last few step times. A mean would let one slow step (a garbage collection, a cache insert
 * reading a state back) just before a prompt arrives set the pace for its whole prefill: on the H200 one such
 * step left the undisturbed cost at 1.5x its real value, and pacing at a third of the intended interval.
 */
class RecentMedian {
  private readonly samples: number[] = [];
  private next = 0;

  constructor(private readonly size: number) {}

  push(ms: number): void {
    if (this.samples.length < this.size) this.samples.push(ms);
    else this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.size;
  }

  /** 0 while empty. */
  get value(): number {
    if (this.samples.length === 0) return 0;
    const sorted = [...this.samples].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
}

/** Size class of a chunk: ceil(log2(tokens)). */
const sizeClass = (tokens: number) => Math.ceil(Math.log2(Math.max(1, tokens)));

export class PrefillPacer {
  /** Decode-only steps while no prompt waits. */
  private readonly quiet: RecentMedian;
  /** Decode-only steps while a prompt waits for its next chunk. */
  private readonly alone: RecentMedian;
  /** Steps carrying a chunk, per size class (total step time, decoding included). */
  private readonly mixed = new Map<number, RecentMedian>();
  private stepsSinceChunk = 0;

  /**
   * @param keep share of decode speed to keep while a prompt prefills (0 < keep < 1)
   * @param samples recent step times each cost is the median of
   */
  constructor(
    readonly keep = 0.75,
    private readonly samples = 15,
  ) {
    if (!(keep > 0 && keep < 1)) throw new RangeError(`decodeKeep must be in (0, 1), got ${keep}`);
    this.quiet = new RecentMedian(samples);
    this.alone = new RecentMedian(samples);
  }

  /** Cost of a decode-only step before the prompt came (the speed to protect); the other kind until known. */
  private get undisturbedMs(): number {
    return this.quiet.value || this.alone.value;
  }

  /** Cost of a decode-only step between chunks; the other kind until known. */
  private get betweenChunksMs(): number {
    return this.alone.value || this.quiet.value;
  }

  /** The running step costs it paces by (ms), for benchmarks and diagnostics. */
  costs(chunkTokens: number): { quietMs: number; aloneMs: number; mixedMs: number; interval: number } {
    return { quietMs: this.quiet.value, aloneMs: this.alone.value, mixedMs: this.estimateMixed(chunkTokens) ?? 0, interval: this.interval(chunkTokens) };
  }

  /** Steps per chunk of `chunkTokens` while slots decode (1 = every step). */
  interval(chunkTokens: number): number {
    const mixed = this.estimateMixed(chunkTokens);
    if (mixed === null) return 1;
    // Know a decode-only cost before pacing: take one decode-only step after the first mixed one.
    const busy = this.betweenChunksMs;
    const quiet = this.undisturbedMs;
    if (busy === 0) return 2;
    if (mixed - quiet < NEGLIGIBLE_MS) return 1;
    // k·q / ((k - 1)·b + x) >= keep  <=>  k·(q - keep·b) >= keep·(x - b)
    const room = quiet - this.keep * busy;
    if (room <= 0) return MAX_INTERVAL;
    return Math.min(MAX_INTERVAL, Math.max(1, Math.ceil((this.keep * (mixed - busy)) / room - 1e-9)));
  }

  /** Whether the next step, which has decoding slots, may carry a chunk of `chunkTokens`. */
  chunkAllowed(chunkTokens: number): boolean {
    return this.stepsSinceChunk + 1 >= this.interval(chunkTokens);
  }

  /** A step with decoding slots was planned, with or without a chunk (counted when planned, not when timed). */
  stepPlanned(carriesChunk: boolean): void {
    this.stepsSinceChunk = carriesChunk ? 0 : this.stepsSinceChunk + 1;
  }

  /**
   * Time of a finished step that had decoding slots, the prompt tokens it carried besides (0: none), and
   * whether a prompt was waiting for chunks when it was planned.
   */
  record(ms: number, chunkTokens: number, promptWaiting: boolean): void {
    if (chunkTokens > 0) {
      const c = sizeClass(chunkTokens);
      let m = this.mixed.get(c);
      if (!m) this.mixed.set(c, (m = new RecentMedian(this.samples)));
      m.push(ms);
    } else if (promptWaiting) {
      this.alone.push(ms);
    } else {
      this.quiet.push(ms);
    }
  }

  /**
   * Cost of a step with a chunk of this size: its class's, else a larger class's (an overestimate, which
   * errs toward decoding), else a smaller class's extra cost scaled up linearly; null when nothing is known.
   */
  private estimateMixed(chunkTokens: number): number | null {
    const want = sizeClass(chunkTokens);
    const own = this.mixed.get(want);
    if (own !== undefined) return own.value;
    let above: number | null = null;
    let below: number | null = null;
    for (const c of this.mixed.keys()) {
      if (c > want && (above === null || c < above)) above = c;
      if (c < want && (below === null || c > below)) below = c;
    }
    if (above !== null) return this.mixed.get(above)!.value;
    if (below !== null) {
      const base = this.betweenChunksMs;
      const extra = Math.max(0, this.mixed.get(below)!.value - base);
      return base + extra * 2 ** (want - below);
    }
    return null;
  }
}
