// Text → embedding vector (the model's hidden state at a chosen layer, as the engine defines it), pooled
// over the text's tokens ('last' token, or 'mean' over all of them) and optionally scaled to unit length.

import type { EmbedPooling, Engine } from '../../engine/api';
import { optionalBoolean, optionalInteger, optionalName, optionalText } from './coerce';
import { ParameterError } from './parameter-error';

export interface EmbedInput {
  text?: unknown;
  /** Layer whose output is taken; unset = the engine's default. */
  layer?: unknown;
  state?: unknown;
  /** 'last' (the last token's vector, default) or 'mean' (averaged over the tokens). */
  pooling?: unknown;
  /** Scale the vector to L2 norm 1 (cosine similarity becomes a dot product). */
  normalize?: unknown;
}

export interface PreparedEmbed {
  text: string;
  layer?: number;
  state?: string;
  pooling?: EmbedPooling;
  normalize?: boolean;
}

export interface EmbedOutput {
  embedding: number[];
  dimensions: number;
}

const POOLINGS: readonly EmbedPooling[] = ['last', 'mean'];

export function prepareEmbed(input: EmbedInput): PreparedEmbed {
  const text = optionalText('text', input.text);
  if (text === undefined) throw new ParameterError('text', 'is empty');
  const prepared: PreparedEmbed = { text };
  const layer = optionalInteger('layer', input.layer, 0);
  if (layer !== undefined) prepared.layer = layer;
  const state = optionalName('state', input.state);
  if (state !== undefined) prepared.state = state;
  const pooling = optionalName('pooling', input.pooling);
  if (pooling !== undefined) {
    if (!(POOLINGS as readonly string[]).includes(pooling)) {
      throw new ParameterError('pooling', `must be one of ${POOLINGS.join(', ')}, got ${JSON.stringify(pooling)}`);
    }
    prepared.pooling = pooling as EmbedPooling;
  }
  const normalize = optionalBoolean('normalize', input.normalize);
  if (normalize !== undefined) prepared.normalize = normalize;
  return prepared;
}

export async function runEmbed(engine: Engine, prepared: PreparedEmbed, signal?: AbortSignal): Promise<EmbedOutput> {
  const { nLayer } = engine.modelInfo;
  if (prepared.layer !== undefined && prepared.layer >= nLayer) {
    throw new ParameterError('layer', `must be below the model's ${nLayer} layers, got ${prepared.layer}`);
  }
  const vector = await engine.embed(prepared.text, {
    layer: prepared.layer,
    state: prepared.state,
    signal,
    ...(prepared.pooling !== undefined && { pooling: prepared.pooling }),
  });
  if (prepared.normalize) l2Normalize(vector);
  // Plain numbers: both hosts serialize outputs as JSON, where a Float32Array becomes an object.
  return { embedding: Array.from(vector), dimensions: vector.length };
}

/** Scales a vector to unit L2 norm in place (a zero vector stays zero). */
export function l2Normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] /= norm;
  return v;
}
