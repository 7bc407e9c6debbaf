// The Engine of api.ts served by `rwkv-flow serve` in another process (engine/server/): every node works the
// same with it as with the in-process engine. Events arrive as the server streams them; errors keep their
// class and message (engine/server/wire-errors.ts); an abort closes the HTTP request, which makes the server
// cancel the work and free the slot, and the stream ends here with the same 'abort' stop event the
// in-process engine gives.
//
// listStates() and unloadState() are synchronous in the Engine interface, so the client keeps a copy of the
// server's state list: taken at connect, replaced by every state call's answer, and refreshed in the
// background when listed (states another process loaded show up from the next listing). An unload is sent
// at once; every later call waits for it, so calls keep their order.

import * as http from 'http';
import * as https from 'https';
import { StringDecoder } from 'string_decoder';
import type { ChooseResult, Engine, EngineLease, GenerateEvent, GenerateRequest, StateInfo } from './api';
import { AbortError } from './errors';
import { ENGINE_ROUTES } from './server/engine-routes';
import { fromWireError } from './server/wire-errors';

export interface RemoteEngineOptions {
  /** Base URL of the server, e.g. http://127.0.0.1:8720 */
  url: string;
  apiKey?: string;
}

/** Bound of one answer or one streamed line read from the server. */
const MAX_ANSWER_BYTES = 256 * 1024 * 1024;
/** States listed at most this often from the server in the background. */
const STATE_REFRESH_MS = 1000;

type Answer = http.IncomingMessage;

export class RemoteEngine implements Engine {
  private readonly base: URL;
  private readonly agent: http.Agent;
  private states: StateInfo[] = [];
  /** State changes in flight (unloads): later calls start after them. */
  private pending: Promise<unknown> = Promise.resolve();
  private lastRefresh = 0;
  private closed = false;

  private constructor(
    private readonly options: RemoteEngineOptions,
    public readonly modelInfo: Engine['modelInfo'],
  ) {
    this.base = RemoteEngine.baseUrl(options.url);
    this.agent = new (this.base.protocol === 'https:' ? https.Agent : http.Agent)({ keepAlive: true });
  }

  /** Connects (reads the model's info and the loaded states); throws when the server cannot be used. */
  static async connect(options: RemoteEngineOptions): Promise<RemoteEngine> {
    const probe = new RemoteEngine(options, { version: '', nLayer: 0, nEmbd: 0, vocabSize: 0, adapter: '' });
    try {
      const info = (await probe.call('GET', ENGINE_ROUTES.info)) as { modelInfo: Engine['modelInfo']; states: StateInfo[] };
      if (!info || typeof info.modelInfo !== 'object') throw new Error(`${probe.where()} did not answer as an rwkv-flow server`);
      const engine = new RemoteEngine(options, info.modelInfo);
      engine.states = info.states ?? [];
      engine.lastRefresh = Date.now();
      return engine;
    } finally {
      probe.close();
    }
  }

  private static baseUrl(url: string): URL {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new Error(`server URL ${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:8720)`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`server URL must be http:// or https://, got ${JSON.stringify(url)}`);
    if (!u.pathname.endsWith('/')) u.pathname += '/';
    return u;
  }

  close(): void {
    this.closed = true;
    this.agent.destroy();
  }

  // ---- generate ------------------------------------------------------------------------------------

  generate(req: GenerateRequest, opts: { signal?: AbortSignal } = {}): AsyncIterable<GenerateEvent> {
    return this.stream(req, opts.signal);
  }

  /** Sends on the first iteration, as the in-process engine submits then; leaving the loop early cancels. */
  private async *stream(req: GenerateRequest, outer: AbortSignal | undefined): AsyncGenerator<GenerateEvent> {
    const started = performance.now();
    const seen = { promptTokens: 0, text: '', tokens: 0, startAt: 0, firstDeltaAt: 0 };
    const aborted = () => this.abortStop(seen, started);
    if (outer?.aborted) {
      yield aborted();
      return;
    }
    const controller = new AbortController();
    const forward = () => controller.abort();
    outer?.addEventListener('abort', forward, { once: true });
    try {
      await this.pending;
      let answer: Answer;
      try {
        answer = await this.send('POST', ENGINE_ROUTES.generate, { json: req, signal: controller.signal });
      } catch (err) {
        if (controller.signal.aborted) {
          yield aborted();
          return;
        }
        throw err;
      }
      if (answer.statusCode !== 200) throw await this.failure(answer);
      let stopped = false;
      try {
        for await (const line of ndjsonLines(answer)) {
          const event = JSON.parse(line) as GenerateEvent | { type: 'error'; error: unknown };
          if (event.type === 'error') throw fromWireError(event.error, 'the generation failed on the server');
          if (event.type === 'start') (seen.promptTokens = event.promptTokens), (seen.startAt = performance.now());
          if (event.type === 'delta') {
            seen.text += event.text;
            seen.tokens += event.tokens.length;
            seen.firstDeltaAt ||= performance.now();
          }
          if (event.type === 'stop') stopped = true;
          yield event;
          if (stopped) return;
        }
      } catch (err) {
        if (!controller.signal.aborted) throw this.transportError(err);
      }
      if (controller.signal.aborted) {
        yield aborted();
        return;
      }
      throw new Error(`${this.where()} closed the stream before the generation ended`);
    } finally {
      outer?.removeEventListener('abort', forward);
      // Closes the request if it is still open: the server then cancels the generation.
      controller.abort();
    }
  }

  /** The stop event the in-process engine gives an aborted request, from what arrived before the abort. */
  private abortStop(seen: { promptTokens: number; text: string; tokens: number; startAt: number; firstDeltaAt: number }, started: number): GenerateEvent {
    const now = performance.now();
    const start = seen.startAt || now;
    const firstDelta = seen.firstDeltaAt || now;
    return {
      type: 'stop',
      reason: 'abort',
      text: seen.text,
      promptTokens: seen.promptTokens,
      completionTokens: seen.tokens,
      timing: { queueMs: start - started, prefillMs: Math.max(0, firstDelta - start), decodeMs: Math.max(0, now - firstDelta), totalMs: now - started },
    };
  }

  // ---- choose, embed -------------------------------------------------------------------------------

  async choose(prompt: string, choices: string[], opts: { calibrate?: boolean; state?: string; signal?: AbortSignal } = {}): Promise<ChooseResult> {
    const { signal, ...options } = opts;
    return (await this.call('POST', ENGINE_ROUTES.choose, { json: { prompt, choices, options }, signal })) as ChooseResult;
  }

  async embed(text: string, opts: { layer?: number; state?: string; signal?: AbortSignal } = {}): Promise<Float32Array> {
    const { signal, ...options } = opts;
    const answer = (await this.call('POST', ENGINE_ROUTES.embed, { json: { text, options }, signal })) as { embedding: number[] };
    return Float32Array.from(answer.embedding);
  }

  // ---- states --------------------------------------------------------------------------------------

  async loadState(name: string, source: string | Uint8Array): Promise<StateInfo> {
    const answer =
      typeof source === 'string'
        ? await this.call('POST', ENGINE_ROUTES.loadState, { json: { name, file: source } })
        : await this.call('POST', `${ENGINE_ROUTES.uploadState}?name=${encodeURIComponent(name)}`, { bytes: source });
    return this.stateAnswer(answer);
  }

  unloadState(name: string): void {
    this.states = this.states.filter((s) => s.name !== name);
    const sent = this.pending.then(() => this.call('POST', ENGINE_ROUTES.unloadState, { json: { name } }, false));
    // A failed unload (server gone) shows on the next call, which fails the same way.
    this.pending = sent.then(
      (answer) => this.takeStates(answer),
      () => undefined,
    );
  }

  listStates(): StateInfo[] {
    if (!this.closed && Date.now() - this.lastRefresh > STATE_REFRESH_MS) {
      this.lastRefresh = Date.now();
      this.call('GET', ENGINE_ROUTES.states).then(
        (answer) => this.takeStates(answer),
        () => undefined,
      );
    }
    return this.states.map((s) => ({ ...s }));
  }

  async saveConversation(prompt: string, file: string, opts: { state?: string } = {}): Promise<{ bytes: number; tokens: number }> {
    return (await this.call('POST', ENGINE_ROUTES.saveConversation, { json: { prompt, file, options: opts } })) as { bytes: number; tokens: number };
  }

  async loadConversation(file: string, name: string): Promise<StateInfo> {
    return this.stateAnswer(await this.call('POST', ENGINE_ROUTES.loadConversation, { json: { file, name } }));
  }

  private stateAnswer(answer: unknown): StateInfo {
    this.takeStates(answer);
    return (answer as { state: StateInfo }).state;
  }

  private takeStates(answer: unknown): void {
    const states = (answer as { states?: unknown } | undefined)?.states;
    if (Array.isArray(states)) this.states = states as StateInfo[];
  }

  // ---- HTTP ----------------------------------------------------------------------------------------

  private where(): string {
    return `rwkv-flow server at ${this.base.origin}`;
  }

  /** A JSON call; a non-200 answer throws the server's error as its class. */
  private async call(method: 'GET' | 'POST', path: string, body: { json?: unknown; bytes?: Uint8Array; signal?: AbortSignal } = {}, ordered = true): Promise<unknown> {
    if (ordered) await this.pending;
    const answer = await this.send(method, path, body);
    const text = await readAll(answer);
    if (answer.statusCode !== 200) throw this.errorFrom(answer.statusCode ?? 0, text);
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${this.where()} answered ${path} with something that is not JSON`);
    }
  }

  private send(method: string, path: string, body: { json?: unknown; bytes?: Uint8Array; signal?: AbortSignal }): Promise<Answer> {
    if (this.closed) return Promise.reject(new Error(`the connection to the ${this.where()} was closed`));
    const url = new URL(path.replace(/^\//, ''), this.base);
    const payload = body.json !== undefined ? Buffer.from(JSON.stringify(body.json)) : body.bytes ? Buffer.from(body.bytes.buffer, body.bytes.byteOffset, body.bytes.byteLength) : undefined;
    const headers: Record<string, string | number> = { Accept: 'application/json, application/x-ndjson' };
    if (payload) {
      headers['Content-Type'] = body.json !== undefined ? 'application/json' : 'application/octet-stream';
      headers['Content-Length'] = payload.length;
    }
    if (this.options.apiKey) headers.Authorization = `Bearer ${this.options.apiKey}`;
    const signal = body.signal;
    return new Promise<Answer>((resolve, reject) => {
      if (signal?.aborted) return reject(new AbortError());
      const request = (url.protocol === 'https:' ? https : http).request(url, { method, headers, agent: this.agent });
      const onAbort = () => {
        request.destroy();
        reject(new AbortError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      request.on('response', (answer) => {
        // The answer is read by the caller; an abort from now on closes it mid-read.
        signal?.removeEventListener('abort', onAbort);
        if (signal) signal.addEventListener('abort', () => request.destroy(), { once: true });
        resolve(answer);
      });
      request.on('error', (err) => {
        signal?.removeEventListener('abort', onAbort);
        reject(signal?.aborted ? new AbortError() : this.transportError(err));
      });
      request.end(payload);
    });
  }

  private async failure(answer: Answer): Promise<Error> {
    return this.errorFrom(answer.statusCode ?? 0, await readAll(answer));
  }

  private errorFrom(status: number, text: string): Error {
    let wire: unknown;
    try {
      wire = (JSON.parse(text) as { error?: unknown }).error;
    } catch {
      wire = undefined;
    }
    if (!wire) return new Error(`${this.where()} answered HTTP ${status}`);
    if (status === 401) return new Error(`${this.where()} refused the API key (HTTP 401): set the key the server was started with`);
    return fromWireError(wire, `${this.where()} answered HTTP ${status}`);
  }

  /** A socket error (ECONNREFUSED, ECONNRESET...) said in terms of the server; any other error as it is. */
  private transportError(err: unknown): Error {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (typeof code !== 'string') return err instanceof Error ? err : new Error(String(err));
    return new Error(`${this.where()} is not reachable (${code})`, { cause: err });
  }
}

/** A lease on a remote engine: release() closes its connections (the server's engine stays). */
export async function connectRemoteEngine(options: RemoteEngineOptions): Promise<EngineLease> {
  const engine = await RemoteEngine.connect(options);
  return {
    engine,
    release: async () => engine.close(),
  };
}

async function readAll(answer: Answer): Promise<string> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of answer as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_ANSWER_BYTES) {
      answer.destroy();
      throw new Error(`the server's answer is over ${MAX_ANSWER_BYTES} bytes`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString('utf8');
}

async function* ndjsonLines(answer: Answer): AsyncGenerator<string> {
  // A character split across two chunks is joined before it is decoded.
  const decoder = new StringDecoder('utf8');
  let rest = '';
  for await (const chunk of answer as AsyncIterable<Buffer>) {
    rest += decoder.write(chunk);
    if (rest.length > MAX_ANSWER_BYTES) throw new Error(`a streamed event is over ${MAX_ANSWER_BYTES} bytes`);
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      if (line.trim()) yield line;
    }
  }
  rest += decoder.end();
  if (rest.trim()) yield rest;
}
