// A deterministic CPU stand-in for the GPU backend: a tiny recurrent model whose state is a real
// function of the whole token history (a tanh RNN), so any mix-up of slots, states, prefixes or
// chunk boundaries changes the logits. Optional "script" makes one token per step overwhelmingly
// likely, to drive exact outputs (stop strings, choose). Records every run() for inspection.

import type { InferenceBackend, ModelInfo, SlotJob } from '../engine/types';

export interface FakeBackendOptions {
  slots: number;
  vocab?: number;
  seed?: number;
  /** Next favoured token from the last token and the number of tokens fed so far. */
  script?: (lastToken: number, fed: number) => number | null;
  /** Milliseconds each run() takes (lets tests cancel mid-way). */
  delayMs?: number;
  vocabMap?: Int32Array;
}

// Layout like RWKV-7 with 1 layer, C = 4, 1 head of 4: att_x [4], att_kv [16], ffn_x [4].
const C = 4;
const STATE = 2 * C + C * C;
// Floats 0 and 1 hold the last token and the count; 2.. are the hidden recurrence.
const HIDDEN = STATE - 2;

function lcg(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 0x1_0000_0000 - 0.5;
  };
}

export class FakeBackend implements InferenceBackend {
  readonly info: ModelInfo;
  readonly slots: number;
  readonly stateSize = STATE;
  readonly adapterName = 'fake-cpu';
  readonly calls: SlotJob[][] = [];
  /** Throw this from the next run() (then clear it). */
  failNext: Error | null = null;
  disposed = false;
  private readonly states: Float32Array[];
  private readonly W: Float32Array;
  private readonly E: Float32Array;
  private readonly U: Float32Array;

  constructor(private readonly opts: FakeBackendOptions) {
    const vocab = opts.vocab ?? 257;
    this.slots = opts.slots;
    this.info = {
      version: 'v7',
      nLayer: 1,
      nEmbd: C,
      nHead: 1,
      headSize: C,
      vocabSize: vocab,
      ffnDim: 4 * C,
      loraDims: { w: 1, a: 1, v: 1, g: 1 },
      ...(opts.vocabMap ? { vocabMap: opts.vocabMap } : {}),
    };
    this.states = Array.from({ length: opts.slots }, () => new Float32Array(STATE));
    const r = lcg(opts.seed ?? 7);
    this.W = Float32Array.from({ length: HIDDEN * HIDDEN }, () => r() * 0.9);
    this.E = Float32Array.from({ length: vocab * HIDDEN }, () => r() * 2);
    this.U = Float32Array.from({ length: vocab * HIDDEN }, () => r() * 6);
  }

  async run(jobs: SlotJob[]): Promise<(Float32Array | null)[]> {
    this.calls.push(jobs.map((j) => ({ slot: j.slot, tokens: Array.from(j.tokens), output: j.output })));
    if (this.opts.delayMs) await new Promise((r) => setTimeout(r, this.opts.delayMs));
    else await new Promise((r) => setImmediate(r));
    if (this.disposed) throw new Error('backend disposed');
    if (this.failNext) {
      const e = this.failNext;
      this.failNext = null;
      throw e;
    }
    const seen = new Set<number>();
    for (const j of jobs) {
      if (!Number.isInteger(j.slot) || j.slot < 0 || j.slot >= this.slots) throw new Error(`bad slot ${j.slot}`);
      if (seen.has(j.slot)) throw new Error(`slot ${j.slot} twice in one run`);
      seen.add(j.slot);
      if (j.tokens.length === 0 && j.output !== 'none') throw new Error('empty job with output');
      for (let i = 0; i < j.tokens.length; i++) {
        const t = j.tokens[i];
        if (!Number.isInteger(t) || t < 0 || t >= this.info.vocabSize) throw new Error(`token ${t} out of range`);
      }
    }
    return jobs.map((j) => {
      const s = this.states[j.slot];
      const all: Float32Array[] = [];
      for (let i = 0; i < j.tokens.length; i++) {
        this.advance(s, j.tokens[i]);
        if (j.output === 'all' || (j.output === 'last' && i === j.tokens.length - 1)) all.push(this.logits(s));
      }
      if (j.output === 'none') return null;
      if (all.length === 1) return all[0];
      const out = new Float32Array(all.length * this.info.vocabSize);
      all.forEach((l, i) => out.set(l, i * this.info.vocabSize));
      return out;
    });
  }

  async readState(slot: number): Promise<Float32Array> {
    await new Promise((r) => setImmediate(r));
    return this.states[slot].slice();
  }

  writeState(slot: number, state: Float32Array): void {
    if (state.length !== STATE) throw new Error('bad state size');
    this.states[slot].set(state);
  }

  resetState(slot: number): void {
    this.states[slot].fill(0);
  }

  copyState(from: number, to: number): void {
    this.states[to].set(this.states[from]);
  }

  dispose(): void {
    this.disposed = true;
  }

  /** Logits after feeding `tokens` from the zero state, computed directly (reference for tests). */
  referenceLogits(tokens: number[]): Float32Array {
    const s = new Float32Array(STATE);
    for (const t of tokens) this.advance(s, t);
    return this.logits(s);
  }

  private advance(s: Float32Array, token: number): void {
    const h = new Float32Array(HIDDEN);
    for (let i = 0; i < HIDDEN; i++) {
      let acc = this.E[token * HIDDEN + i];
      for (let k = 0; k < HIDDEN; k++) acc += this.W[i * HIDDEN + k] * s[2 + k];
      h[i] = Math.tanh(acc);
    }
    s.set(h, 2);
    s[0] = token;
    s[1] += 1;
  }

  private logits(s: Float32Array): Float32Array {
    const V = this.info.vocabSize;
    const out = new Float32Array(V);
    for (let v = 0; v < V; v++) {
      let acc = 0;
      for (let k = 0; k < HIDDEN; k++) acc += this.U[v * HIDDEN + k] * s[2 + k];
      out[v] = acc;
    }
    const favoured = this.opts.script?.(s[0], s[1]);
    if (favoured !== null && favoured !== undefined) out[favoured] += 50;
    return out;
  }
}

/** Byte-level tokenizer: World-style ids, byte b = id b+1, id 0 = end of text. */
export const byteTokenizer = {
  encode(text: string): number[] {
    return Array.from(Buffer.from(text, 'utf8'), (b) => b + 1);
  },
  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    return Uint8Array.from(Array.from(ids), (id) => {
      if (id < 1 || id > 256) throw new RangeError(`token ${id} is not a byte token`);
      return id - 1;
    });
  },
};
