// Initial states (e.g. trained state-tuning files) and conversation states (a prompt already run
// through the model, saved as CBOR) as one node with an operation selector. File paths are relative to
// the model's state folder: a path that is absolute or has '..' parts is refused here, before the engine
// (which confines every path again after following symlinks, engine/state-folder.ts).

import type { Engine, StateInfo } from '../../engine/api';
import { statePathProblem } from '../../engine/state-folder';
import { optionalName, optionalText } from './coerce';
import { ParameterError } from './parameter-error';

export const STATE_OPERATIONS = ['load', 'unload', 'list', 'saveConversation', 'loadConversation'] as const;
export type StateOperationName = (typeof STATE_OPERATIONS)[number];

export interface StateOperationInput {
  operation?: unknown;
  /** State name to load under / unload / start a conversation from. */
  name?: unknown;
  /** load: file path of the state, or its bytes. */
  source?: unknown;
  /** saveConversation / loadConversation: the CBOR file. */
  file?: unknown;
  /** saveConversation: the text to run through the model. */
  prompt?: unknown;
  /** saveConversation: initial state to start from. */
  state?: unknown;
}

export type StateOperation =
  | { operation: 'load'; name: string; source: string | Uint8Array }
  | { operation: 'unload'; name: string }
  | { operation: 'list' }
  | { operation: 'saveConversation'; prompt: string; file: string; state?: string }
  | { operation: 'loadConversation'; file: string; name: string };

export type StateOperationOutput =
  | { operation: 'load' | 'loadConversation'; state: StateInfo }
  | { operation: 'unload'; name: string; states: StateInfo[] }
  | { operation: 'list'; states: StateInfo[] }
  | { operation: 'saveConversation'; file: string; bytes: number; tokens: number };

function required(name: string, value: unknown): string {
  const s = optionalName(name, value);
  if (s === undefined) throw new ParameterError(name, 'is required for this operation');
  return s;
}

/** A file path inside the state folder (relative, no '.' or '..' parts). */
function statePath(name: string, value: unknown): string {
  const file = required(name, value);
  const problem = statePathProblem(file);
  if (problem) throw new ParameterError(name, `${JSON.stringify(file)} ${problem}`);
  return file;
}

/** The state-folder file an operation reads or writes, if any (for host file-access policies). */
export function stateFileOf(op: StateOperation): string | undefined {
  if (op.operation === 'load') return typeof op.source === 'string' ? op.source : undefined;
  if (op.operation === 'saveConversation' || op.operation === 'loadConversation') return op.file;
  return undefined;
}

export function prepareStateOperation(input: StateOperationInput): StateOperation {
  const operation = optionalName('operation', input.operation) ?? 'list';
  switch (operation) {
    case 'load': {
      const name = required('name', input.name);
      if (input.source instanceof Uint8Array) {
        if (input.source.length === 0) throw new ParameterError('source', 'is an empty buffer');
        // Node Buffers are Uint8Arrays; copy into a plain one so the engine sees one type.
        return { operation, name, source: new Uint8Array(input.source) };
      }
      return { operation, name, source: statePath('source', input.source) };
    }
    case 'unload':
      return { operation, name: required('name', input.name) };
    case 'list':
      return { operation };
    case 'saveConversation': {
      const prompt = optionalText('prompt', input.prompt);
      if (prompt === undefined) throw new ParameterError('prompt', 'is required to save a conversation');
      const op: StateOperation = { operation, prompt, file: statePath('file', input.file) };
      const state = optionalName('state', input.state);
      if (state !== undefined) op.state = state;
      return op;
    }
    case 'loadConversation':
      return { operation, file: statePath('file', input.file), name: required('name', input.name) };
    default:
      throw new ParameterError('operation', `must be one of ${STATE_OPERATIONS.join(', ')}, got ${JSON.stringify(operation)}`);
  }
}

export async function runStateOperation(engine: Engine, op: StateOperation): Promise<StateOperationOutput> {
  switch (op.operation) {
    case 'load':
      return { operation: 'load', state: await engine.loadState(op.name, op.source) };
    case 'unload':
      engine.unloadState(op.name);
      return { operation: 'unload', name: op.name, states: engine.listStates() };
    case 'list':
      return { operation: 'list', states: engine.listStates() };
    case 'saveConversation': {
      const saved = await engine.saveConversation(op.prompt, op.file, op.state !== undefined ? { state: op.state } : undefined);
      return { operation: 'saveConversation', file: op.file, ...saved };
    }
    case 'loadConversation':
      return { operation: 'loadConversation', state: await engine.loadConversation(op.file, op.name) };
  }
}
