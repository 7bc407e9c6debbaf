// Ranking fixed choices by the model's perplexity of each continuation of a prompt.

import type { ChooseResult, Engine } from '../../engine/api';
import { isBlank, optionalBoolean, optionalName, optionalText } from './coerce';
import { ParameterError } from './parameter-error';

export interface ChooseInput {
  prompt?: unknown;
  /** An array of strings, JSON array text, or one choice per line. Leading spaces are kept: " yes" and "yes" tokenize differently. */
  choices?: unknown;
  /** Subtract each choice's perplexity without the prompt, so short common words don't always win. */
  calibrate?: unknown;
  state?: unknown;
}

export interface PreparedChoose {
  prompt: string;
  choices: string[];
  calibrate?: boolean;
  state?: string;
}

export interface ChooseOutput {
  choice: string;
  index: number;
  ranking: ChooseResult['ranking'];
}

export function parseChoices(name: string, value: unknown): string[] {
  if (isBlank(value)) throw new ParameterError(name, 'is empty: give at least two choices');
  let list: unknown = value;
  if (typeof value === 'string') {
    if (value.trim().startsWith('[')) {
      try {
        list = JSON.parse(value);
      } catch (err) {
        throw new ParameterError(name, `looks like a JSON array but does not parse: ${(err as Error).message}`);
      }
    } else {
      list = value.split(/\r?\n/).filter((line) => line.trim() !== '');
    }
  }
  if (!Array.isArray(list) || !list.every((c) => typeof c === 'string' && c.length > 0)) {
    throw new ParameterError(name, 'must be an array of non-empty strings (or one choice per line)');
  }
  if (list.length < 2) throw new ParameterError(name, `needs at least two choices, got ${list.length}`);
  return list as string[];
}

export function prepareChoose(input: ChooseInput): PreparedChoose {
  const prompt = optionalText('prompt', input.prompt);
  if (prompt === undefined) throw new ParameterError('prompt', 'is empty');
  const prepared: PreparedChoose = { prompt, choices: parseChoices('choices', input.choices) };
  const calibrate = optionalBoolean('calibrate', input.calibrate);
  if (calibrate !== undefined) prepared.calibrate = calibrate;
  const state = optionalName('state', input.state);
  if (state !== undefined) prepared.state = state;
  return prepared;
}

export async function runChoose(engine: Engine, prepared: PreparedChoose, signal?: AbortSignal): Promise<ChooseOutput> {
  const result = await engine.choose(prepared.prompt, prepared.choices, {
    calibrate: prepared.calibrate,
    state: prepared.state,
    signal,
  });
  const best = result.ranking[0];
  if (!best) throw new Error('engine returned an empty ranking');
  return { choice: best.choice, index: best.index, ranking: result.ranking };
}
