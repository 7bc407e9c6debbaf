// Logit bias as a flow gives it: entries of a token (its text, or its World id) and a bias, from an
// editor list ({entry: [...]} in n8n), an array, or an object {"<id>": bias}. Ids go to the sampler's
// logitBias; texts to logitBiasText, which the engine tokenizes (the bias applies to each of the text's tokens).

import type { SamplerOptions } from '../../engine/api';
import { isBlank } from './coerce';
import { ParameterError } from './parameter-error';

const MAX_ENTRIES = 1024;

export function parseLogitBias(name: string, value: unknown): Pick<SamplerOptions, 'logitBias' | 'logitBiasText'> {
  if (isBlank(value)) return {};
  let v = value;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch (err) {
      throw new ParameterError(name, `is not valid JSON: ${(err as Error).message}`);
    }
  }
  // n8n's fixedCollection: { entry: [...] }
  if (v && typeof v === 'object' && !Array.isArray(v) && Array.isArray((v as { entry?: unknown }).entry)) v = (v as { entry: unknown[] }).entry;
  const ids: Record<number, number> = {};
  const texts: Record<string, number> = {};
  const add = (where: string, kind: 'id' | 'text', token: unknown, biasValue: unknown) => {
    const bias = typeof biasValue === 'string' && biasValue.trim() !== '' ? Number(biasValue) : biasValue;
    if (typeof bias !== 'number' || Number.isNaN(bias) || bias === Infinity) {
      throw new ParameterError(`${where}.bias`, `must be a number or -Infinity, got ${JSON.stringify(biasValue)}`);
    }
    if (kind === 'id') {
      const id = typeof token === 'string' ? Number(token.trim()) : token;
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 65535) {
        throw new ParameterError(`${where}.token`, `must be a token id (0-65535), got ${JSON.stringify(token)}`);
      }
      ids[id] = (ids[id] ?? 0) + bias;
    } else {
      if (typeof token !== 'string' || token.length === 0) throw new ParameterError(`${where}.token`, 'must be a non-empty text');
      texts[token] = (texts[token] ?? 0) + bias;
    }
  };
  if (Array.isArray(v)) {
    if (v.length > MAX_ENTRIES) throw new ParameterError(name, `has ${v.length} entries; at most ${MAX_ENTRIES}`);
    v.forEach((e, i) => {
      if (!e || typeof e !== 'object') throw new ParameterError(`${name}[${i}]`, 'must be an object {token, bias}');
      const entry = e as { kind?: unknown; token?: unknown; text?: unknown; id?: unknown; bias?: unknown };
      if (entry.id !== undefined) add(`${name}[${i}]`, 'id', entry.id, entry.bias);
      else if (entry.text !== undefined) add(`${name}[${i}]`, 'text', entry.text, entry.bias);
      else add(`${name}[${i}]`, entry.kind === 'id' ? 'id' : 'text', entry.token, entry.bias);
    });
  } else if (v && typeof v === 'object') {
    const entries = Object.entries(v);
    if (entries.length > MAX_ENTRIES) throw new ParameterError(name, `has ${entries.length} entries; at most ${MAX_ENTRIES}`);
    for (const [id, bias] of entries) add(`${name}["${id}"]`, 'id', id, bias);
  } else {
    throw new ParameterError(name, 'must be a list of {token, bias} or an object {"<token id>": bias}');
  }
  return {
    ...(Object.keys(ids).length > 0 && { logitBias: ids }),
    ...(Object.keys(texts).length > 0 && { logitBiasText: texts }),
  };
}
