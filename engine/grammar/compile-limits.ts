// Limits on what one constraint may cost to compile and run. A grammar or schema is request
// input, so every size that drives work or memory is bounded here, and going over a limit is a
// ConstraintError naming the keyword or rule and where it is, never a hang or a stack overflow.

import { ConstraintError } from './constraint-error';

export const LIMITS = {
  /** Grammar text, characters. */
  grammarChars: 1_000_000,
  /** Named rules of a grammar. */
  grammarRules: 5_000,
  /** Groups nested in groups (grammar parentheses/brackets, regex groups). */
  nesting: 200,
  /** Any repetition count: GBNF {m,n}, regex {m,n}, minLength/maxLength. */
  repeat: 100_000,
  /** minItems, maxItems and prefixItems. */
  arrayItems: 10_000,
  /** Properties (declared or required) of one schema object, and values of one enum. */
  properties: 1_000,
  /** Length of a property name. */
  keyChars: 1_000,
  /** The schema as JSON text, characters. */
  schemaChars: 1_000_000,
  /** JSON nesting depth of the schema document. */
  schemaDepth: 100,
  /** JSON values (objects, arrays, strings, ...) in the schema document. */
  schemaValues: 50_000,
  /** Automaton states of KBNF's #e/#ex regexes, all of one grammar together. */
  automatonStates: 4_000,
  /** Parses (stacks) in those states together: what exploring them costs. */
  automatonParses: 25_000,
  /** Characters of KBNF's #substrs strings, all of one grammar together. */
  substringChars: 20_000,
  /** Byte-level grammar positions after expanding repetitions. */
  positions: 1_000_000,
  /** Expression nesting the lowering pass follows (deeper input is refused earlier). */
  exprDepth: 2_000,
  /** Bytes of the shortest output a constraint allows: a longer one cannot be a model's answer. */
  shortestOutputBytes: 200_000,
  /** Size of the generated schema-validator code brought back to the main thread. */
  validatorCodeChars: 4_000_000,
  /** Wall time of one compilation in its worker. */
  compileMs: 10_000,
  /** Heap of one compile worker. */
  compileMemoryMb: 256,
};

/** A constraint refused for its size (not for being malformed). */
export class LimitError extends ConstraintError {}

export function overLimit(what: string, value: number, limit: number, place?: string): ConstraintError {
  return new LimitError(`${what} is ${value}, above the limit of ${limit}`, place);
}

/** A value met while walking a schema, with the way back to the root for its JSON pointer. */
interface Visit {
  value: unknown;
  depth: number;
  parent: Visit | null;
  key: string;
}

function pointerOf(v: Visit): string {
  const keys: string[] = [];
  for (let n: Visit | null = v; n && n.parent; n = n.parent) keys.push(n.key.replace(/~/g, '~0').replace(/\//g, '~1'));
  return ['#', ...keys.reverse()].join('/');
}

/**
 * Checks a schema document's size and depth without recursion (it is user input and may be
 * nested 100,000 deep), before anything else walks it. Throws with the JSON pointer of the
 * first value past the depth limit.
 */
export function checkSchemaShape(schema: unknown): void {
  const stack: Visit[] = [{ value: schema, depth: 0, parent: null, key: '' }];
  let values = 0;
  while (stack.length) {
    const visit = stack.pop()!;
    const v = visit.value;
    if (++values > LIMITS.schemaValues) throw overLimit('the number of JSON values in the schema', values, LIMITS.schemaValues, pointerOf(visit));
    if (v === null || typeof v !== 'object') continue;
    if (visit.depth >= LIMITS.schemaDepth) throw new LimitError(`the schema is nested deeper than ${LIMITS.schemaDepth} levels`, pointerOf(visit));
    const depth = visit.depth + 1;
    // Values waiting on the stack count too, so one huge array or object is refused before it is pushed.
    const push = (value: unknown, key: string) => {
      if (values + stack.length >= LIMITS.schemaValues) throw overLimit('the number of JSON values in the schema', values + stack.length + 1, LIMITS.schemaValues, pointerOf(visit));
      stack.push({ value, depth, parent: visit, key });
    };
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) push(v[i], String(i));
    else for (const key in v) if (Object.hasOwn(v, key)) push((v as Record<string, unknown>)[key], key);
  }
}
