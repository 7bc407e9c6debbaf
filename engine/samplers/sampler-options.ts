// Defaults and validation of sampler parameters. Defaults follow ai00-core's NucleusParams,
// TypicalParams and MirostatParams so flows ported from ai00 behave the same.

import type { SamplerOptions } from '../api';
import { RequestError } from '../errors';

export const AI00_DEFAULTS = {
  temperature: 1.0,
  topP: 0.5,
  topK: 128,
  presencePenalty: 0.3,
  frequencyPenalty: 0.3,
  penaltyDecay: 0.99654026,
  tau: 0.5,
  mirostatTau: 3.0,
  mirostatEta: 0.1,
} as const;

export interface ResolvedSamplerOptions {
  kind: 'nucleus' | 'typical' | 'mirostat';
  temperature: number;
  topP: number;
  /** 0 = no limit. */
  topK: number;
  presencePenalty: number;
  frequencyPenalty: number;
  penaltyDecay: number;
  tau: number;
  mirostatTau: number;
  mirostatEta: number;
  /** World token id → additive bias. */
  logitBias: Map<number, number>;
  seed: number | undefined;
  /** 0 = off. */
  minP: number;
  /** 1 = off. */
  repetitionPenalty: number;
  repetitionWindow: number;
}

export const MAX_REPETITION_WINDOW = 4096;
/**
 * Largest logit bias in size (besides -Infinity, which forbids a token). The biases of a row add up, and logits are
 * f32 on the GPU: a bias past f32's range would become +Infinity there and break the request's draw.
 */
export const MAX_LOGIT_BIAS = 1e6;
const BIAS_RULE = `a number in [-${MAX_LOGIT_BIAS}, ${MAX_LOGIT_BIAS}] or -Infinity`;
const isBias = (v: unknown): boolean => typeof v === 'number' && (v === -Infinity || Math.abs(v) <= MAX_LOGIT_BIAS);
const MAX_BIAS_TEXTS = 1024;
const MAX_BIAS_TEXT_CHARS = 256;

const KNOWN_KEYS = new Set([
  'kind', 'temperature', 'topP', 'topK', 'presencePenalty', 'frequencyPenalty', 'penaltyDecay',
  'tau', 'mirostatTau', 'mirostatEta', 'logitBias', 'seed', 'logitBiasText', 'minP', 'repetitionPenalty', 'repetitionWindow',
]);

function num(
  opts: SamplerOptions,
  key: keyof SamplerOptions,
  fallback: number,
  ok: (v: number) => boolean,
  rule: string,
): number {
  const v = opts[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) {
    throw new RequestError(`sampler.${key} must be ${rule}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Fill in defaults and check every parameter; throws RequestError naming the bad one. `encode` turns
 * logitBiasText entries into World ids (without it they are refused).
 */
export function resolveSamplerOptions(
  opts: SamplerOptions | undefined,
  vocabWorldIds?: (id: number) => boolean,
  encode?: (text: string) => number[],
): ResolvedSamplerOptions {
  const o: SamplerOptions = opts ?? {};
  if (typeof o !== 'object' || Array.isArray(o)) throw new RequestError('sampler must be an object');
  for (const key of Object.keys(o)) {
    if (!KNOWN_KEYS.has(key)) throw new RequestError(`unknown sampler option "${key}" (known: ${[...KNOWN_KEYS].join(', ')})`);
  }
  const kind = o.kind ?? 'nucleus';
  if (kind !== 'nucleus' && kind !== 'typical' && kind !== 'mirostat') {
    throw new RequestError(`sampler.kind must be "nucleus", "typical" or "mirostat", got ${JSON.stringify(kind)}`);
  }
  const d = AI00_DEFAULTS;
  const resolved: ResolvedSamplerOptions = {
    kind,
    temperature: num(o, 'temperature', d.temperature, (v) => v >= 0 && v <= 100, 'a number in [0, 100] (0 = greedy)'),
    topP: num(o, 'topP', d.topP, (v) => v > 0 && v <= 1, 'a number in (0, 1]'),
    topK: num(o, 'topK', d.topK, (v) => Number.isInteger(v) && v >= 0, 'an integer >= 0 (0 = no limit)'),
    presencePenalty: num(o, 'presencePenalty', d.presencePenalty, (v) => Math.abs(v) <= 100, 'a number in [-100, 100]'),
    frequencyPenalty: num(o, 'frequencyPenalty', d.frequencyPenalty, (v) => Math.abs(v) <= 100, 'a number in [-100, 100]'),
    penaltyDecay: num(o, 'penaltyDecay', d.penaltyDecay, (v) => v >= 0 && v <= 1, 'a number in [0, 1]'),
    tau: num(o, 'tau', d.tau, (v) => v > 0 && v <= 1, 'a number in (0, 1] (typical probability mass)'),
    mirostatTau: num(o, 'mirostatTau', d.mirostatTau, (v) => v > 0 && v <= 100, 'a number in (0, 100] (target surprise, bits)'),
    mirostatEta: num(o, 'mirostatEta', d.mirostatEta, (v) => v > 0 && v <= 1, 'a number in (0, 1] (learning rate)'),
    logitBias: new Map(),
    seed: undefined,
    minP: num(o, 'minP', 0, (v) => v >= 0 && v < 1, 'a number in [0, 1) (0 = off)'),
    repetitionPenalty: num(o, 'repetitionPenalty', 1, (v) => v > 0 && v <= 10, 'a number in (0, 10] (1 = off)'),
    repetitionWindow: num(o, 'repetitionWindow', 64, (v) => Number.isInteger(v) && v >= 1 && v <= MAX_REPETITION_WINDOW, `an integer in [1, ${MAX_REPETITION_WINDOW}]`),
  };
  if (o.seed !== undefined && o.seed !== null) {
    if (typeof o.seed !== 'number' || !Number.isSafeInteger(o.seed) || o.seed < 0) {
      throw new RequestError(`sampler.seed must be a non-negative integer, got ${JSON.stringify(o.seed)}`);
    }
    resolved.seed = o.seed;
  }
  if (o.logitBias !== undefined && o.logitBias !== null) {
    if (typeof o.logitBias !== 'object' || Array.isArray(o.logitBias)) {
      throw new RequestError('sampler.logitBias must be an object mapping token ids to numbers');
    }
    for (const [key, value] of Object.entries(o.logitBias)) {
      const id = Number(key);
      if (!Number.isInteger(id) || id < 0 || String(id) !== key.trim()) {
        throw new RequestError(`sampler.logitBias key ${JSON.stringify(key)} is not a token id`);
      }
      if (vocabWorldIds && !vocabWorldIds(id)) {
        throw new RequestError(`sampler.logitBias token id ${id} is not in the model's vocabulary`);
      }
      if (!isBias(value)) throw new RequestError(`sampler.logitBias[${id}] must be ${BIAS_RULE}, got ${JSON.stringify(value)}`);
      resolved.logitBias.set(id, value);
    }
  }
  if (o.logitBiasText !== undefined && o.logitBiasText !== null) {
    if (typeof o.logitBiasText !== 'object' || Array.isArray(o.logitBiasText)) {
      throw new RequestError('sampler.logitBiasText must be an object mapping texts to numbers');
    }
    const entries = Object.entries(o.logitBiasText);
    if (entries.length > MAX_BIAS_TEXTS) throw new RequestError(`sampler.logitBiasText has ${entries.length} texts; at most ${MAX_BIAS_TEXTS}`);
    for (const [text, value] of entries) {
      const what = `sampler.logitBiasText[${JSON.stringify(text.slice(0, 40))}]`;
      if (text.length === 0 || text.length > MAX_BIAS_TEXT_CHARS) throw new RequestError(`${what}: the text must have 1 to ${MAX_BIAS_TEXT_CHARS} characters`);
      if (!isBias(value)) throw new RequestError(`${what} must be ${BIAS_RULE}, got ${JSON.stringify(value)}`);
      if (!encode) throw new RequestError('sampler.logitBiasText needs the engine\'s tokenizer');
      let ids: number[];
      try {
        ids = encode(text);
      } catch (e) {
        throw new RequestError(`${what}: cannot be tokenized: ${(e as Error).message}`);
      }
      for (const id of ids) {
        if (vocabWorldIds && !vocabWorldIds(id)) throw new RequestError(`${what}: token ${id} is not in the model's vocabulary`);
        resolved.logitBias.set(id, (resolved.logitBias.get(id) ?? 0) + value);
      }
    }
  }
  return resolved;
}
