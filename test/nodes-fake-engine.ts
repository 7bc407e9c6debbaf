// A scripted in-memory Engine for the host-adapter tests: deterministic output, real AbortSignal
// handling, and counters that show whether slots and leases are freed. It is a test double for
// engine/api.ts only; the adapters are also tested against the real engine in nodes-real-engine.test.ts.

import * as fs from 'fs';
import * as path from 'path';
import type {
  ChooseResult,
  Engine,
  EngineConfig,
  EngineLease,
  GenerateEvent,
  GenerateRequest,
  StateInfo,
} from '../engine/api';

export interface FakeEngineOptions {
  /** Milliseconds between decoded tokens (lets tests cancel mid-generation). */
  tokenDelayMs?: number;
  /** Text to "generate" for a request (also under a JSON schema); default echoes words of the prompt. */
  reply?: (req: GenerateRequest) => string;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (ms <= 0) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

export class FakeEngine implements Engine {
  readonly modelInfo = { version: 'v7', nLayer: 3, nEmbd: 8, vocabSize: 512, adapter: 'fake' };
  readonly requests: GenerateRequest[] = [];
  /** The pooling each embed call asked for. */
  readonly embedPoolings: (string | undefined)[] = [];
  /** Generations currently holding a "slot". */
  active = 0;
  maxActive = 0;
  aborted = 0;
  private readonly states = new Map<string, StateInfo>();
  /** The state folder of the config it was last provided for: its files are relative to it, as the real engine's. */
  stateDir = '.';

  constructor(readonly options: FakeEngineOptions = {}) {}

  async *generate(req: GenerateRequest, opts: { signal?: AbortSignal } = {}): AsyncIterable<GenerateEvent> {
    this.requests.push(req);
    if (req.state !== undefined && !this.states.has(req.state)) throw new Error(`unknown state "${req.state}"`);
    const reply = this.options.reply ? this.options.reply(req) : req.jsonSchema ? JSON.stringify({ answer: req.prompt.length }) : defaultReply(req);
    const pieces = reply.match(/\s*\S+/g) ?? [];
    const promptTokens = req.prompt.length;
    const wantsLogprobs = req.logprobs === true || (req.topLogprobs ?? 0) > 0;
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    const started = Date.now();
    try {
      yield { type: 'queued', position: 0 };
      yield { type: 'start', promptTokens, cachedTokens: 0 };
      yield { type: 'prefill', done: promptTokens, total: promptTokens };
      let text = '';
      let reason: 'stop' | 'length' | 'abort' = 'stop';
      for (const [i, piece] of pieces.entries()) {
        await sleep(this.options.tokenDelayMs ?? 0, opts.signal);
        if (opts.signal?.aborted) {
          reason = 'abort';
          this.aborted++;
          break;
        }
        if (req.maxTokens !== undefined && i >= req.maxTokens) {
          reason = 'length';
          break;
        }
        const hit = req.stop?.find((s) => (text + piece).includes(s));
        if (hit) break;
        text += piece;
        // A made-up log-probability per piece: -(its index + 1) / 10.
        const logprobs = wantsLogprobs ? [{ id: i, token: piece, logprob: -(i + 1) / 10 }] : undefined;
        yield { type: 'delta', text: piece, tokens: [i], ...(logprobs && { logprobs }) };
      }
      const completionTokens = reason === 'abort' ? 0 : Math.min(pieces.length, req.maxTokens ?? Infinity);
      const totalMs = Date.now() - started;
      yield {
        type: 'stop',
        reason,
        text,
        json: req.jsonSchema && reason === 'stop' ? JSON.parse(text) : undefined,
        ...(wantsLogprobs && { meanLogprob: completionTokens > 0 ? -(completionTokens + 1) / 20 : 0 }),
        promptTokens,
        completionTokens,
        timing: { queueMs: 0, prefillMs: 0, decodeMs: totalMs, totalMs },
      };
    } finally {
      this.active--;
    }
  }

  async choose(prompt: string, choices: string[], opts: { calibrate?: boolean; state?: string } = {}): Promise<ChooseResult> {
    // The choice sharing most characters with the prompt is "most likely".
    const ranking = choices.map((choice, index) => {
      const overlap = [...choice.toLowerCase()].filter((c) => prompt.toLowerCase().includes(c)).length;
      const logProb = overlap - choice.length - (opts.calibrate ? 0.5 : 0);
      return { choice, index, logProb, perplexity: Math.exp(-logProb / choice.length), tokens: choice.length };
    });
    ranking.sort((a, b) => a.perplexity - b.perplexity);
    return { ranking };
  }

  async embed(text: string, opts: { layer?: number; pooling?: string } = {}): Promise<Float32Array> {
    this.embedPoolings.push(opts.pooling);
    const v = new Float32Array(this.modelInfo.nEmbd);
    for (let i = 0; i < text.length; i++) v[i % v.length] += text.charCodeAt(i) / 100 + (opts.layer ?? 0);
    return v;
  }

  async loadState(name: string, source: string | Uint8Array): Promise<StateInfo> {
    const bytes = typeof source === 'string' ? fs.readFileSync(path.join(this.stateDir, source)) : source;
    const info: StateInfo = { name, source: typeof source === 'string' ? source : 'buffer', bytes: bytes.length };
    this.states.set(name, info);
    return info;
  }

  unloadState(name: string): void {
    if (!this.states.delete(name)) throw new Error(`state "${name}" is not loaded`);
  }

  listStates(): StateInfo[] {
    return [...this.states.values()];
  }

  async saveConversation(prompt: string, file: string): Promise<{ bytes: number; tokens: number }> {
    fs.writeFileSync(path.join(this.stateDir, file), Buffer.from(prompt));
    return { bytes: prompt.length, tokens: prompt.length };
  }

  async loadConversation(file: string, name: string): Promise<StateInfo> {
    return this.loadState(name, file);
  }
}

function defaultReply(req: GenerateRequest): string {
  return ` echo: ${req.prompt.split(/\s+/).slice(-3).join(' ')}`;
}

/** An engine provider handing out leases on one FakeEngine and counting them. */
export class FakeEngineProvider {
  acquired = 0;
  released = 0;
  readonly configs: EngineConfig[] = [];
  failWith?: Error;

  constructor(readonly engine: FakeEngine = new FakeEngine()) {}

  get held(): number {
    return this.acquired - this.released;
  }

  readonly provide = async (config: EngineConfig): Promise<EngineLease> => {
    this.configs.push(config);
    if (config.stateDir !== undefined) this.engine.stateDir = config.stateDir;
    if (this.failWith) throw this.failWith;
    this.acquired++;
    let released = false;
    return {
      engine: this.engine,
      release: async () => {
        if (released) throw new Error('lease released twice');
        released = true;
        this.released++;
      },
    };
  };
}
