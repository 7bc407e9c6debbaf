// Grammar- and JSON-schema-constrained decoding. compileConstraint validates the constraint
// (nothing is queued when it is wrong), and returns an object whose matchers give a token mask
// per decoding step over the full World vocabulary.

import { buildAutomaton, CompiledConstraint, CompiledGrammarConstraint } from './compiled-constraint';
import { ConstraintError } from './constraint-error';
import { parseGrammar } from './grammar-parser';
import { checkJsonOutput, compileSchemaValidator } from './schema-validator';
import { schemaToGrammar } from './schema-to-grammar';
import { TokenTrie, VocabLike } from './token-trie';

export { ConstraintError } from './constraint-error';
export type { CompiledConstraint } from './compiled-constraint';
export type { ConstraintMatcher } from './grammar-matcher';
export type { VocabLike } from './token-trie';
export { canonicalJson } from './json-text';

export interface ConstraintSpec {
  /** KBNF or GBNF grammar text. */
  grammar?: string;
  /** JSON Schema (draft 2020-12). */
  jsonSchema?: object;
}

/** Compiled constraints per vocabulary, so repeated requests share automata and masks. */
const MAX_CACHED_CONSTRAINTS = 32;
const compiledCache = new WeakMap<object, Map<string, CompiledConstraint>>();

export function compileConstraint(spec: ConstraintSpec, vocab: VocabLike): CompiledConstraint {
  if (!vocab || typeof vocab.tokenBytes !== 'function' || !(vocab.vocabSize > 0))
    throw new ConstraintError('vocab must provide vocabSize and tokenBytes(id)');
  const hasGrammar = spec.grammar !== undefined;
  const hasSchema = spec.jsonSchema !== undefined;
  if (hasGrammar === hasSchema) throw new ConstraintError('give exactly one of grammar or jsonSchema');
  if (hasGrammar && typeof spec.grammar !== 'string') throw new ConstraintError('grammar must be a string');

  const key = hasGrammar ? 'g:' + spec.grammar : 's:' + JSON.stringify(spec.jsonSchema);
  let perVocab = compiledCache.get(vocab);
  if (!perVocab) compiledCache.set(vocab, (perVocab = new Map()));
  const hit = perVocab.get(key);
  if (hit) {
    perVocab.delete(key);
    perVocab.set(key, hit);
    return hit;
  }
  const compiled = hasGrammar ? compileGrammar(spec.grammar!, vocab) : compileSchema(spec.jsonSchema!, vocab);
  if (perVocab.size >= MAX_CACHED_CONSTRAINTS) perVocab.delete(perVocab.keys().next().value!);
  perVocab.set(key, compiled);
  return compiled;
}

function compileGrammar(text: string, vocab: VocabLike): CompiledGrammarConstraint {
  const automaton = buildAutomaton(parseGrammar(text));
  return new CompiledGrammarConstraint(automaton, TokenTrie.of(vocab));
}

function compileSchema(schema: object, vocab: VocabLike): CompiledGrammarConstraint {
  const validate = compileSchemaValidator(schema);
  const automaton = buildAutomaton(schemaToGrammar(schema as Record<string, unknown>).ir);
  return new CompiledGrammarConstraint(automaton, TokenTrie.of(vocab), (text) => checkJsonOutput(validate, text));
}
