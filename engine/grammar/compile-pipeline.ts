// Constraint text to plain tables: parse (grammar text or JSON schema), lower to the flat byte
// grammar, check it, pack it into typed arrays with its shortest-derivation tables, and for a
// schema compile the ajv validator to code. Everything heavy a request can cause happens here,
// within the limits of compile-limits.ts; it runs in a compile worker (compile-worker.ts), and
// what it returns is plain data the main thread builds its automaton from.

import { checkSchemaShape, LimitError, LIMITS } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { GrammarTables, packGrammar } from './flat-grammar';
import { checkLeftRecursion, pruneUnproductive } from './grammar-checks';
import { GrammarIR } from './grammar-ir';
import { parseGrammar } from './grammar-parser';
import { lowerGrammar } from './lower-grammar';
import { schemaValidatorCode } from './schema-validator';
import { JsonWhitespace, schemaToGrammar } from './schema-to-grammar';
import { ruleMinLengths } from './shortest-completion';

/** A constraint as it travels to a worker: grammar text, or a schema as JSON text. */
export interface ConstraintSource {
  kind: 'grammar' | 'schema';
  text: string;
  /** Schemas: whitespace between JSON tokens (compact when absent). */
  whitespace?: JsonWhitespace;
}

export interface CompiledTables {
  grammar: GrammarTables;
  /** ajv standalone code of the schema's validator (schemas only). */
  validatorCode?: string;
}

export function compileTables(source: ConstraintSource): CompiledTables {
  let ir: GrammarIR;
  let schema: object | undefined;
  if (source.kind === 'grammar') ir = parseGrammar(source.text);
  else {
    schema = JSON.parse(source.text) as object;
    checkSchemaShape(schema);
    // The grammar first: its limits refuse oversized schemas before ajv spends seconds on them.
    // Other refusals may stem from a malformed schema, which ajv names better.
    try {
      ir = schemaToGrammar(schema as Record<string, unknown>, source.whitespace).ir;
    } catch (e) {
      if (e instanceof ConstraintError && !(e instanceof LimitError)) schemaValidatorCode(schema);
      throw e;
    }
  }
  const flat = lowerGrammar(ir);
  pruneUnproductive(flat);
  checkLeftRecursion(flat);
  const packed = packGrammar(flat);
  const grammar: GrammarTables = { ...packed, ...ruleMinLengths(packed) };
  const shortest = grammar.minLen[grammar.root];
  if (shortest > LIMITS.shortestOutputBytes)
    throw new ConstraintError(
      `the shortest output this ${source.kind === 'grammar' ? 'grammar' : 'schema'} allows is ${shortest} bytes, above the limit of ${LIMITS.shortestOutputBytes}`,
      flat.rulePlaces[flat.root],
    );
  return schema === undefined ? { grammar } : { grammar, validatorCode: schemaValidatorCode(schema) };
}

/** The buffers of the tables, to transfer rather than copy. */
export function tablesTransferList(t: CompiledTables): ArrayBuffer[] {
  const g = t.grammar;
  return [g.kind, g.arg, g.byteSets, g.altStarts, g.ruleAltIndex, g.minLen, g.bestAlt].map((a) => a.buffer as ArrayBuffer);
}
