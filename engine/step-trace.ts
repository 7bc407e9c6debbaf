// What the scheduler's steps looked like, for explaining a run's wall time (bench/batch-flow.ts): how many steps,
// which carried prompt chunks, how many chunk tokens and decoding rows each had, and where the time went (the
// backend call, or host work between steps). Fed by Scheduler.onStep(); keeps three numbers a step and a
// run-length timeline: meant for a benchmark's run, not for a server's lifetime.

/** One finished step, as the scheduler reports it. */
export interface StepRecord {
  /** performance.now() when the step was planned. */
  startedMs: number;
  /** Time in backend.run(). */
  backendMs: number;
  /** Jobs of one token (decoding slots; a prompt's last token fed alone counts here too, as the pacer sees it). */
  decodeRows: number;
  /** Prompt chunks (jobs of more than one token) it carried. */
  chunkJobs: number;
  /** Tokens of those chunks. */
  chunkTokens: number;
  /** A draw call (Scheduler drawSteps): its decode steps, each of decodeRows rows; absent for a single step. */
  drawSteps?: number;
}

/** A stretch of consecutive steps of the same shape, for the timeline. */
interface Segment {
  /** Same key = same shape: the decode-row bucket and whether chunks went. */
  key: string;
  steps: number;
  decodeRowsMin: number;
  decodeRowsMax: number;
  chunkJobs: number;
  chunkTokens: number;
  /** Wall time from the first step's start to the next segment's first start (or the last step's end). */
  ms: number;
}

export interface StepTraceSummary {
  steps: number;
  /** Steps carrying chunks while slots decoded / while none did / decode-only steps. */
  mixedSteps: number;
  prefillOnlySteps: number;
  decodeOnlySteps: number;
  chunkTokens: number;
  /** Chunk tokens per step that carried any: min / median / max. */
  chunkTokensPerChunkStep: [number, number, number];
  /** Chunks per step that carried any: min / median / max. */
  chunksPerChunkStep: [number, number, number];
  /** Decoding rows per step that had any: min / median / max. */
  decodeRowsPerDecodeStep: [number, number, number];
  /** Wall time from the first step's start to the last step's end, and the part spent in backend calls by step kind. */
  wallMs: number;
  backendMs: { prefillOnly: number; mixed: number; decodeOnly: number };
  /** Wall time outside backend calls: admission (state uploads), sampling, consumers, waits on state read-backs. */
  betweenStepsMs: number;
  /** Consecutive steps of one shape: "12× d1-8 +c5/240 (812 ms)" = 12 steps with 1 to 8 decoding rows carrying 5 chunks of 240 tokens in all. */
  timeline: string[];
}

/** Timeline lines past this are folded into one, so a pathological run cannot flood the output. */
const MAX_TIMELINE = 40;

function spread(values: number[]): [number, number, number] {
  if (values.length === 0) return [0, 0, 0];
  const sorted = [...values].sort((a, b) => a - b);
  return [sorted[0], sorted[sorted.length >> 1], sorted[sorted.length - 1]];
}

/** Decode rows grouped in powers of two, so a batch growing by one row a step does not start a segment each time. */
function rowBucket(rows: number): number {
  return rows === 0 ? 0 : 32 - Math.clz32(rows);
}

export class StepTrace {
  private readonly chunkTokensPerStep: number[] = [];
  private readonly chunksPerStep: number[] = [];
  private readonly rowsPerStep: number[] = [];
  private readonly segments: Segment[] = [];
  private steps = 0;
  private mixed = 0;
  private prefillOnly = 0;
  private decodeOnly = 0;
  private chunkTokens = 0;
  private readonly backend = { prefillOnly: 0, mixed: 0, decodeOnly: 0 };
  private firstStart = NaN;
  private lastEnd = NaN;
  private lastStart = NaN;

  /** Record a step (pass as the scheduler's step listener: `scheduler.onStep((s) => trace.add(s))`). */
  add(step: StepRecord): void {
    const { startedMs, backendMs, decodeRows, chunkJobs, chunkTokens } = step;
    // A draw call counts as its steps (all decode-only, of the same rows).
    const count = step.drawSteps ?? 1;
    if (this.steps === 0) this.firstStart = startedMs;
    // The previous segment's time runs up to this step's start: host work between steps is part of it.
    const open = this.segments[this.segments.length - 1];
    if (open) open.ms += startedMs - this.lastStart;
    this.steps += count;
    this.lastStart = startedMs;
    this.lastEnd = Math.max(this.lastEnd || 0, startedMs + backendMs);
    this.chunkTokens += chunkTokens;
    if (chunkJobs > 0) this.chunkTokensPerStep.push(chunkTokens), this.chunksPerStep.push(chunkJobs);
    if (decodeRows > 0) this.rowsPerStep.push(decodeRows);
    const kind = chunkJobs === 0 ? 'decodeOnly' : decodeRows === 0 ? 'prefillOnly' : 'mixed';
    if (kind === 'decodeOnly') this.decodeOnly += count;
    else if (kind === 'prefillOnly') this.prefillOnly += count;
    else this.mixed += count;
    this.backend[kind] += backendMs;
    const key = `${rowBucket(decodeRows)}:${chunkJobs > 0}`;
    if (open && open.key === key) {
      open.steps += count;
      open.decodeRowsMin = Math.min(open.decodeRowsMin, decodeRows);
      open.decodeRowsMax = Math.max(open.decodeRowsMax, decodeRows);
      open.chunkJobs += chunkJobs;
      open.chunkTokens += chunkTokens;
    } else {
      this.segments.push({ key, steps: count, decodeRowsMin: decodeRows, decodeRowsMax: decodeRows, chunkJobs, chunkTokens, ms: 0 });
    }
  }

  summary(): StepTraceSummary {
    const segments = this.segments.map((s, i) => ({ ...s, ms: i === this.segments.length - 1 ? s.ms + (this.lastEnd - this.lastStart) : s.ms }));
    const line = (s: Segment) => {
      const rows = s.decodeRowsMax === 0 ? 'prefill' : s.decodeRowsMin === s.decodeRowsMax ? `d${s.decodeRowsMin}` : `d${s.decodeRowsMin}-${s.decodeRowsMax}`;
      const chunks = s.chunkJobs > 0 ? ` +c${s.chunkJobs}/${s.chunkTokens}` : '';
      return `${s.steps}× ${rows}${chunks} (${Math.round(s.ms)} ms)`;
    };
    let timeline = segments.map(line);
    if (timeline.length > MAX_TIMELINE) {
      const folded = segments.slice(MAX_TIMELINE - 1);
      const steps = folded.reduce((n, s) => n + s.steps, 0);
      const ms = folded.reduce((n, s) => n + s.ms, 0);
      timeline = [...timeline.slice(0, MAX_TIMELINE - 1), `… ${folded.length} more stretches: ${steps} steps (${Math.round(ms)} ms)`];
    }
    const round = (ms: number) => Math.round(ms);
    return {
      steps: this.steps,
      mixedSteps: this.mixed,
      prefillOnlySteps: this.prefillOnly,
      decodeOnlySteps: this.decodeOnly,
      chunkTokens: this.chunkTokens,
      chunkTokensPerChunkStep: spread(this.chunkTokensPerStep),
      chunksPerChunkStep: spread(this.chunksPerStep),
      decodeRowsPerDecodeStep: spread(this.rowsPerStep),
      wallMs: this.steps === 0 ? 0 : round(this.lastEnd - this.firstStart),
      backendMs: { prefillOnly: round(this.backend.prefillOnly), mixed: round(this.backend.mixed), decodeOnly: round(this.backend.decodeOnly) },
      betweenStepsMs: this.steps === 0 ? 0 : round(this.lastEnd - this.firstStart - this.backend.prefillOnly - this.backend.mixed - this.backend.decodeOnly),
      timeline,
    };
  }
}
