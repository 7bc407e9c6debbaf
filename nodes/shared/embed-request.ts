// Text → embedding vector (the model's hidden state at a chosen layer, as the engine defines it).

import type { Engine } from '../../engine/api';
import { optionalInteger, optionalName, optionalText } from './coerce';
import { ParameterError } from './parameter-error';

export interface EmbedInput {
  text?: unknown;
  /** Layer whose output is taken; unset = the engine's default. */
  layer?: unknown;
  state?: unknown;
}

export interface PreparedEmbed {
  text: string;
  layer?: number;
  state?: string;
}

export interface EmbedOutput {
  embedding: number[];
  dimensions: number;
}

export function prepareEmbed(input: EmbedInput): PreparedEmbed {
  const text = optionalText('text', input.text);
  if (text === undefined) throw new ParameterError('text', 'is empty');
  const prepared: PreparedEmbed = { text };
  const layer = optionalInteger('layer', input.layer, 0);
  if (layer !== undefined) prepared.layer = layer;
  const state = optionalName('state', input.state);
  if (state !== undefined) prepared.state = state;
  return prepared;
}

export async function runEmbed(engine: Engine, prepared: PreparedEmbed, signal?: AbortSignal): Promise<EmbedOutput> {
  const { nLayer } = engine.modelInfo;
  if (prepared.layer !== undefined && prepared.layer >= nLayer) {
    throw new ParameterError('layer', `must be below the model's ${nLayer} layers, got ${prepared.layer}`);
  }
  const vector = await engine.embed(prepared.text, { layer: prepared.layer, state: prepared.state, signal });
  // Plain numbers: both hosts serialize outputs as JSON, where a Float32Array becomes an object.
  return { embedding: Array.from(vector), dimensions: vector.length };
}
