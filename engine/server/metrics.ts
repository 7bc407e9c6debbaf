// What `GET /metrics` reports, in the Prometheus text format: the engine's own counters (tokens prefilled and
// decoded, prompt tokens served from the prefix cache, steps, GPU time), how busy it is now (queue depth,
// slots busy), tokens/s over the last seconds, and the server's request and error counts.

import type { EngineMetrics } from '../engine';

/** Seconds over which the tokens/s gauges are averaged. */
const RATE_WINDOW_S = 10;

interface Sample {
  at: number;
  decode: number;
  prefill: number;
}

export class ServerMetrics {
  private readonly requests = new Map<string, number>();
  private readonly errors = new Map<string, number>();
  private completionTokens = 0;
  private inFlight = 0;
  private readonly samples: Sample[] = [];
  private readonly timer: NodeJS.Timeout;

  /** `engine` gives the current engine's counters, or null when it has none (a remote or test engine). */
  constructor(private readonly engine: () => EngineMetrics | null) {
    this.sample();
    this.timer = setInterval(() => this.sample(), 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  requestStarted(): void {
    this.inFlight++;
  }

  /** One answered HTTP request; `route` is the route pattern, never the raw path (bounded label set). */
  requestEnded(route: string, status: number): void {
    this.inFlight--;
    const key = `route="${route}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  /** A request that ended in an error; `kind` is the error class (RequestError, QueueFullError...). */
  error(kind: string): void {
    const safe = /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(kind) ? kind : 'Error';
    this.errors.set(safe, (this.errors.get(safe) ?? 0) + 1);
  }

  generated(tokens: number): void {
    this.completionTokens += tokens;
  }

  /** The engine's counters; null while it has none to give (released, being rebuilt). */
  private read(): EngineMetrics | null {
    try {
      return this.engine();
    } catch {
      return null;
    }
  }

  private sample(): void {
    const m = this.read();
    this.samples.push({ at: performance.now(), decode: m?.decodeTokens ?? 0, prefill: m?.chunkTokens ?? 0 });
    while (this.samples.length > RATE_WINDOW_S + 1) this.samples.shift();
  }

  /** Tokens/s of one counter between the oldest sample in the window and now (0 after an engine rebuild reset it). */
  private rate(now: number, counter: number, pick: (s: Sample) => number): number {
    const first = this.samples[0];
    const seconds = (now - first.at) / 1000;
    if (!(seconds > 0)) return 0;
    return Math.max(0, (counter - pick(first)) / seconds);
  }

  text(): string {
    const m = this.read();
    const now = performance.now();
    const out: string[] = [];
    const metric = (name: string, type: 'counter' | 'gauge', help: string, lines: [string, number][]) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of lines) out.push(`${name}${labels ? `{${labels}}` : ''} ${Number.isFinite(value) ? value : 0}`);
    };
    if (m) {
      metric('rwkv_queue_depth', 'gauge', 'Requests waiting for a slot.', [['', m.queued]]);
      metric('rwkv_slots_busy', 'gauge', 'Slots running a request.', [['', m.active]]);
      metric('rwkv_slots', 'gauge', 'Slots of the engine (max batch).', [['', m.slots]]);
      metric('rwkv_prefill_tokens_total', 'counter', 'Tokens fed in chunks (prompts, scored continuations).', [['', m.chunkTokens]]);
      metric('rwkv_decode_tokens_total', 'counter', 'Tokens fed one at a time (generation).', [['', m.decodeTokens]]);
      metric('rwkv_cache_hit_tokens_total', 'counter', 'Prompt tokens not prefilled: served from the prefix cache or a slot.', [['', m.cachedPromptTokens]]);
      metric('rwkv_engine_steps_total', 'counter', 'Batched GPU calls.', [['', m.steps]]);
      metric('rwkv_engine_busy_seconds_total', 'counter', 'Time spent in GPU calls.', [['', m.backendMs / 1000]]);
      metric('rwkv_decode_tokens_per_second', 'gauge', `Decode tokens/s over the last ${RATE_WINDOW_S} s.`, [['', this.rate(now, m.decodeTokens, (s) => s.decode)]]);
      metric('rwkv_prefill_tokens_per_second', 'gauge', `Prefill tokens/s over the last ${RATE_WINDOW_S} s.`, [['', this.rate(now, m.chunkTokens, (s) => s.prefill)]]);
    }
    metric('rwkv_completion_tokens_total', 'counter', 'Tokens generated for HTTP callers.', [['', this.completionTokens]]);
    metric('rwkv_http_requests_in_flight', 'gauge', 'HTTP requests being answered.', [['', this.inFlight]]);
    metric('rwkv_http_requests_total', 'counter', 'Answered HTTP requests by route and status.', [...this.requests]);
    metric('rwkv_request_errors_total', 'counter', 'Requests that ended in an error, by error class.', [...this.errors].map(([k, v]) => [`kind="${k}"`, v]));
    return out.join('\n') + '\n';
  }
}
