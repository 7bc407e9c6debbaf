// Paces prefill chunks while other slots decode, so a long prompt costs the decoding requests at most a set
// share of their speed. It keeps an account instead of predicting step costs: every decoding step while a
// prompt waits earns what the promised speed allows it (reference / keep) and pays what it really took (its
// whole period, host work between steps included); a chunk may go whenever the account is not in debt, and its
// cost is paid back by the decode steps after it. Over a prefill the decoding slots therefore get at least
// `keep` of their undisturbed speed, up to one chunk's worth, whatever made the steps slow: the chunk itself,
// decode steps slowed after a chunk, garbage collection, host work, all measured on the H200 (bench/RESULTS.md
// runs 6-11) and all missed by a model of per-step costs. Cheap chunks (a short prompt's tail) barely dent the
// account, so short prompts are not held back; the first chunk of a prefill goes at once.
//
// The reference is the median period of decode-only steps taken with the same number of decoding rows while no
// prompt waited (the speed to protect). A median, because one slow step (a garbage collection, a cache insert)
// just before a prompt would otherwise set the pace of the whole prefill; per row count, because a reference
// measured while one request decoded says nothing of the speed of eight. Until one exists, decode-only steps
// taken while the prompt waits stand in for it.

/** A prompt gets a chunk at least this often however far in debt the account is, so it cannot starve. */
const MAX_INTERVAL = 32;
/** A chunk step costing less than this (ms) over a decode step is not charged: noise, or a backend with no real work. */
const NEGLIGIBLE_MS = 1;

/** Median of the last few step times. */
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

/** Median step periods keyed by the number of decoding rows in the step. */
class MediansByRows {
  private readonly byRows = new Map<number, RecentMedian>();

  constructor(private readonly samples: number) {}

  push(rows: number, ms: number): void {
    let m = this.byRows.get(rows);
    if (!m) this.byRows.set(rows, (m = new RecentMedian(this.samples)));
    m.push(ms);
  }

  value(rows: number): number {
    return this.byRows.get(rows)?.value ?? 0;
  }
}

/** One finished step that had decoding slots. */
export interface PacedStep {
  /** Its whole period: from its start to the next step's start (ms). */
  ms: number;
  /** Slots it decoded one token for. */
  decodeRows: number;
  /** Prompt tokens it carried besides (0: none). */
  chunkTokens: number;
  /** Whether a prompt was waiting for chunks when it was planned. */
  promptWaiting: boolean;
}

/** What the pacer has seen, for benchmarks and diagnostics. */
export interface PacingState {
  /** Reference period of a decode-only step (the last one used; ms). */
  referenceMs: number;
  /** Median period of a step carrying a chunk (ms). */
  chunkStepMs: number;
  /** The account now: ms ahead of (> 0) or behind (< 0) the promised decode speed. */
  creditMs: number;
  /** Decoding steps and chunks in the current or last prefill while slots decoded. */
  steps: number;
  chunks: number;
}

export class PrefillPacer {
  /** Decode-only steps while no prompt waits: the speed to protect. */
  private readonly quiet: MediansByRows;
  /** Decode-only steps while a prompt waits: the reference until a quiet one exists. */
  private readonly waiting: MediansByRows;
  private readonly chunkSteps: RecentMedian;
  private credit = 0;
  /** Steps of this prefill taken before any reference existed, to be credited once one does. */
  private unpriced: { rows: number; ms: number; chunk: boolean }[] = [];
  private referenceMs = 0;
  private inPrefill = false;
  private steps = 0;
  private chunks = 0;
  private stepsSinceChunk = 0;

  /**
   * @param keep share of decode speed to keep while a prompt prefills (0 < keep < 1)
   * @param samples recent step times each reference is the median of
   */
  constructor(
    readonly keep = 0.75,
    samples = 15,
  ) {
    if (!(keep > 0 && keep < 1)) throw new RangeError(`decodeKeep must be in (0, 1), got ${keep}`);
    this.quiet = new MediansByRows(samples);
    this.waiting = new MediansByRows(samples);
    this.chunkSteps = new RecentMedian(samples);
  }

  get state(): PacingState {
    return { referenceMs: this.referenceMs, chunkStepMs: this.chunkSteps.value, creditMs: this.credit, steps: this.steps, chunks: this.chunks };
  }

  /** Whether the next step, which has decoding slots, may carry a chunk. */
  chunkAllowed(): boolean {
    // Steps not priced yet still cost their time: wait for a reference before the next chunk.
    const solvent = this.unpriced.length === 0 && this.credit >= -1e-9;
    return solvent || this.stepsSinceChunk + 1 >= MAX_INTERVAL;
  }

  /** A step with decoding slots was planned, with or without a chunk (counted when planned, not when timed). */
  stepPlanned(carriesChunk: boolean): void {
    this.stepsSinceChunk = carriesChunk ? 0 : this.stepsSinceChunk + 1;
  }

  /** Account for a finished step that had decoding slots. */
  record(step: PacedStep): void {
    const { ms, decodeRows, chunkTokens, promptWaiting } = step;
    if (!promptWaiting && chunkTokens === 0) {
      this.quiet.push(decodeRows, ms);
      // The prefill is over: a later prompt starts with a clean account.
      this.inPrefill = false;
      this.credit = 0;
      this.unpriced = [];
      return;
    }
    if (!this.inPrefill) {
      this.inPrefill = true;
      this.steps = this.chunks = 0;
    }
    this.steps++;
    if (chunkTokens > 0) this.chunks++, this.chunkSteps.push(ms);
    else this.waiting.push(decodeRows, ms);
    this.unpriced.push({ rows: decodeRows, ms, chunk: chunkTokens > 0 });
    const stillUnpriced: typeof this.unpriced = [];
    for (const s of this.unpriced) {
      const reference = this.quiet.value(s.rows) || this.waiting.value(s.rows);
      if (reference === 0) stillUnpriced.push(s);
      else {
        this.referenceMs = reference;
        const cost = s.chunk && s.ms - reference < NEGLIGIBLE_MS ? Math.min(s.ms, reference) : s.ms;
        this.credit += reference / this.keep - cost;
      }
    }
    // Row counts that never get a reference (requests coming and going) must not pile up.
    this.unpriced = stillUnpriced.slice(-MAX_INTERVAL);
  }
}
