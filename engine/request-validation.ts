// Up-front checks of request parameters, so a bad request fails with a clear message before it
// takes a queue place, and never inside the scheduler loop.

import type { GenerateRequest } from './api';
import { RequestError } from './errors';

export const DEFAULT_MAX_TOKENS = 256;
/** The highest cap an operator may set (maxTokensLimit). */
export const MAX_MAX_TOKENS = 1 << 20;
const MAX_STOPS = 32;
const KNOWN_KEYS = new Set(['sharedPrefix', 'prompt', 'maxTokens', 'stop', 'sampler', 'state', 'grammar', 'jsonSchema', 'jsonWhitespace', 'logprobs', 'topLogprobs']);
export const MAX_TOP_LOGPROBS = 20;

export interface CheckedGenerate {
  prompt: string;
  maxTokens: number;
  stop: string[];
  /** Alternatives to report per token when logprobs are on; null when off. */
  topLogprobs: number | null;
}

/**
 * `maxTokensLimit` is the operator's cap: a request asking for more is refused (an API caller learns the
 * limit instead of silently getting less); a request that leaves maxTokens out gets min(default, cap).
 */
export function checkGenerateRequest(req: GenerateRequest, maxTokensLimit = MAX_MAX_TOKENS): CheckedGenerate {
  if (!req || typeof req !== 'object') throw new RequestError('request must be an object');
  for (const key of Object.keys(req)) {
    if (!KNOWN_KEYS.has(key)) throw new RequestError(`unknown request field "${key}" (known: ${[...KNOWN_KEYS].join(', ')})`);
  }
  const prompt = checkText(req.prompt, 'prompt');
  let maxTokens = Math.min(DEFAULT_MAX_TOKENS, maxTokensLimit);
  if (req.maxTokens !== undefined && req.maxTokens !== null) {
    if (typeof req.maxTokens !== 'number' || !Number.isInteger(req.maxTokens) || req.maxTokens < 1) {
      throw new RequestError(`maxTokens must be an integer ≥ 1, got ${JSON.stringify(req.maxTokens)}`);
    }
    if (req.maxTokens > maxTokensLimit) {
      throw new RequestError(`maxTokens ${req.maxTokens} is above this model's limit of ${maxTokensLimit} (maxTokensLimit in the model configuration)`);
    }
    maxTokens = req.maxTokens;
  }
  let stop: string[] = [];
  if (req.stop !== undefined && req.stop !== null) {
    if (!Array.isArray(req.stop)) throw new RequestError('stop must be an array of strings');
    if (req.stop.length > MAX_STOPS) throw new RequestError(`at most ${MAX_STOPS} stop strings, got ${req.stop.length}`);
    req.stop.forEach((s, i) => {
      if (typeof s !== 'string' || s.length === 0) throw new RequestError(`stop[${i}] must be a non-empty string, got ${JSON.stringify(s)}`);
    });
    stop = [...req.stop];
  }
  if (req.state !== undefined && req.state !== null && typeof req.state !== 'string') throw new RequestError('state must be a state name');
  if (req.grammar !== undefined && req.grammar !== null && typeof req.grammar !== 'string') throw new RequestError('grammar must be a string');
  if (req.jsonSchema !== undefined && req.jsonSchema !== null && (typeof req.jsonSchema !== 'object' || Array.isArray(req.jsonSchema))) {
    throw new RequestError('jsonSchema must be a JSON schema object');
  }
  if (req.jsonWhitespace !== undefined && req.jsonWhitespace !== 'compact' && req.jsonWhitespace !== 'flexible')
    throw new RequestError("jsonWhitespace must be 'compact' or 'flexible'");
  if (req.grammar && req.jsonSchema) throw new RequestError('give either grammar or jsonSchema, not both');
  if (req.logprobs !== undefined && req.logprobs !== null && typeof req.logprobs !== 'boolean') {
    throw new RequestError(`logprobs must be true or false, got ${JSON.stringify(req.logprobs)}`);
  }
  let topLogprobs: number | null = req.logprobs ? 0 : null;
  if (req.topLogprobs !== undefined && req.topLogprobs !== null) {
    const n = req.topLogprobs;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_TOP_LOGPROBS) {
      throw new RequestError(`topLogprobs must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${JSON.stringify(n)}`);
    }
    if (n > 0 || req.logprobs) topLogprobs = n;
  }
  return { prompt, maxTokens, stop, topLogprobs };
}

export function checkText(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new RequestError(`${what} must be a string, got ${value === null ? 'null' : typeof value}`);
  return value;
}
