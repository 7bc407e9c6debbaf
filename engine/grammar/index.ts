// Grammar- and JSON-schema-constrained decoding. compileConstraintAsync validates and compiles
// the constraint in a worker thread, bounded in time and memory (nothing is queued when it is
// wrong or too costly), and resolves to an object whose matchers give a token mask per decoding
// step over the full World vocabulary. compileConstraint does the same work synchronously in
// this thread, for tools and tests that own their thread.

import { checkSchemaShape, LIMITS, overLimit } from './compile-limits';
import { CompiledConstraint, CompiledGrammarConstraint } from './compiled-constraint';
import { CompiledTables, compileTables, ConstraintSource } from './compile-pipeline';
import { ConstraintError } from './constraint-error';
import { checkJsonOutput, loadSchemaValidator } from './schema-validator';
import { StringSlice } from './string-slice';
import { TokenTrie, VocabLike } from './token-trie';
import { CompileBounds, compileInWorker } from './worker-compiler';

export { ConstraintError } from './constraint-error';
export { LIMITS as CONSTRAINT_LIMITS } from './compile-limits';
export type { CompiledConstraint } from './compiled-constraint';
export type { ConstraintMatcher } from './grammar-matcher';
export type { VocabLike } from './token-trie';
export type { CompileBounds } from './worker-compiler';
export { canonicalJson } from './json-text';
export type { JsonWhitespace } from './schema-to-grammar';
import type { JsonWhitespace } from './schema-to-grammar';

export interface ConstraintSpec {
  /** KBNF or GBNF grammar text. */
  grammar?: string;
  /** JSON Schema (draft 04, 06, 07, 2019-09 or 2020-12, from its `$schema`; 2020-12 without one). */
  jsonSchema?: object | boolean;
  /** Whitespace between JSON tokens of schema output: 'compact' (default, none) or 'flexible'. */
  jsonWhitespace?: JsonWhitespace;
}

/** Compiled constraints per vocabulary, by content, so repeated requests share automata and masks. */
const MAX_CACHED_CONSTRAINTS = 32;
const compiledCache = new WeakMap<object, Map<string, CompiledConstraint>>();
/** Compilations under way per vocabulary, so concurrent requests for one constraint share a worker job. */
const inFlight = new WeakMap<object, Map<string, Promise<CompiledConstraint>>>();

/** Compiles in a worker thread: the event loop keeps running however costly the constraint. */
export async function compileConstraintAsync(spec: ConstraintSpec, vocab: VocabLike, bounds?: CompileBounds): Promise<CompiledConstraint> {
  const { key, source } = sourceOf(spec, vocab);
  const hit = cached(vocab, key);
  if (hit) return hit;
  let running = inFlight.get(vocab);
  if (!running) inFlight.set(vocab, (running = new Map()));
  // Bounds other than the defaults (tests, benchmarks) get their own job.
  const jobKey = bounds ? `${bounds.timeoutMs ?? ''}/${bounds.memoryMb ?? ''}/${key}` : key;
  let job = running.get(jobKey);
  if (!job) {
    const jobs = running;
    job = compileInWorker(source, bounds).then((tables) => remember(vocab, key, fromTables(tables, vocab)));
    jobs.set(jobKey, job);
    const forget = () => jobs.delete(jobKey);
    job.then(forget, forget);
  }
  return job;
}

/** The same compilation in this thread (blocks it for as long as the constraint takes). */
export function compileConstraint(spec: ConstraintSpec, vocab: VocabLike): CompiledConstraint {
  const { key, source } = sourceOf(spec, vocab);
  return cached(vocab, key) ?? remember(vocab, key, fromTables(compileTables(source), vocab));
}

/** Checks the spec and what it costs to look at (size, depth), and gives its cache key. */
function sourceOf(spec: ConstraintSpec, vocab: VocabLike): { key: string; source: ConstraintSource } {
  if (!vocab || typeof vocab.tokenBytes !== 'function' || !(vocab.vocabSize > 0))
    throw new ConstraintError('vocab must provide vocabSize and tokenBytes(id)');
  const hasGrammar = spec.grammar !== undefined;
  const hasSchema = spec.jsonSchema !== undefined;
  if (hasGrammar === hasSchema) throw new ConstraintError('give exactly one of grammar or jsonSchema');
  if (hasGrammar) {
    if (typeof spec.grammar !== 'string') throw new ConstraintError('grammar must be a string');
    if (spec.grammar.length > LIMITS.grammarChars) throw overLimit('the grammar length (characters)', spec.grammar.length, LIMITS.grammarChars);
    return { key: 'g:' + spec.grammar, source: { kind: 'grammar', text: spec.grammar } };
  }
  // Iterative and bounded, so the JSON text below cannot overflow the stack or run long.
  checkSchemaShape(spec.jsonSchema);
  const text = JSON.stringify(spec.jsonSchema);
  if (text.length > LIMITS.schemaChars) throw overLimit('the schema size (JSON characters)', text.length, LIMITS.schemaChars, '#');
  const whitespace = spec.jsonWhitespace ?? 'compact';
  if (whitespace !== 'compact' && whitespace !== 'flexible') throw new ConstraintError("jsonWhitespace must be 'compact' or 'flexible'");
  return { key: `s:${whitespace}:${text}`, source: { kind: 'schema', text, whitespace } };
}

function cached(vocab: VocabLike, key: string): CompiledConstraint | undefined {
  const perVocab = compiledCache.get(vocab);
  const hit = perVocab?.get(key);
  if (hit) {
    perVocab!.delete(key);
    perVocab!.set(key, hit);
  }
  return hit;
}

function remember(vocab: VocabLike, key: string, compiled: CompiledConstraint): CompiledConstraint {
  let perVocab = compiledCache.get(vocab);
  if (!perVocab) compiledCache.set(vocab, (perVocab = new Map()));
  if (perVocab.size >= MAX_CACHED_CONSTRAINTS) perVocab.delete(perVocab.keys().next().value!);
  perVocab.set(key, compiled);
  return compiled;
}

/** The main thread's part: the automaton over the tables, the vocabulary's trie (built once), the validator. */
function fromTables(tables: CompiledTables, vocab: VocabLike): CompiledConstraint {
  const trie = TokenTrie.of(vocab);
  if (tables.validatorCode === undefined) return new CompiledGrammarConstraint(tables.grammar, trie);
  const validate = loadSchemaValidator(tables.validatorCode);
  return new CompiledGrammarConstraint(tables.grammar, trie, (text) => checkJsonOutput(validate, text));
}

/**
 * Builds the vocabulary's token trie and its string-safe split now (~0.4 s together for the World
 * vocabulary) so that the first constrained request does not stall the event loop building
 * them: the engine calls this while its model loads.
 */
export function prepareVocabulary(vocab: VocabLike): void {
  StringSlice.of(TokenTrie.of(vocab));
}
