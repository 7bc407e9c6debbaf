// The grammar as the parsers and the JSON-schema converter build it: named rules whose bodies
// are expressions over code-point classes, byte classes and rule references. Lowering
// (lower-grammar.ts) turns it into the flat byte-level form the recognizer runs on.

import { CodePointSet } from './code-point-set';

export type Expr =
  /** One character from a code-point set (matched as its UTF-8 bytes). */
  | { t: 'chars'; set: CodePointSet }
  /** One raw byte from a byte set given as inclusive ranges (for byte-level grammars). */
  | { t: 'bytes'; ranges: [number, number][] }
  /** A literal byte string (already UTF-8). */
  | { t: 'lit'; bytes: Uint8Array }
  | { t: 'ref'; name: string; place?: string }
  | { t: 'seq'; items: Expr[] }
  | { t: 'alt'; items: Expr[] }
  /** `max` may be Infinity. */
  | { t: 'rep'; item: Expr; min: number; max: number };

export interface GrammarRule {
  name: string;
  body: Expr;
  /** Where the rule was defined, for error messages (e.g. "line 3" or a JSON pointer). */
  place: string;
}

export interface GrammarIR {
  rules: Map<string, GrammarRule>;
  root: string;
}

const encoder = new TextEncoder();

export const EMPTY: Expr = { t: 'seq', items: [] };

export function lit(text: string): Expr {
  return { t: 'lit', bytes: encoder.encode(text) };
}

export function seq(...items: Expr[]): Expr {
  return seqOf(items);
}

/** seq over a list of any length (a spread call has an argument limit). */
export function seqOf(items: Expr[]): Expr {
  const flat: Expr[] = [];
  for (const it of items) {
    if (it.t === 'seq') flat.push(...it.items);
    else flat.push(it);
  }
  return flat.length === 1 ? flat[0] : { t: 'seq', items: flat };
}

export function alt(...items: Expr[]): Expr {
  return altOf(items);
}

/** alt over a list of any length (a spread call has an argument limit). */
export function altOf(items: Expr[]): Expr {
  const flat: Expr[] = [];
  for (const it of items) {
    if (it.t === 'alt') flat.push(...it.items);
    else flat.push(it);
  }
  return flat.length === 1 ? flat[0] : { t: 'alt', items: flat };
}

export function rep(item: Expr, min: number, max: number): Expr {
  return { t: 'rep', item, min, max };
}

export function opt(item: Expr): Expr {
  return rep(item, 0, 1);
}

export function chars(set: CodePointSet): Expr {
  return { t: 'chars', set };
}

export function ref(name: string, place?: string): Expr {
  return { t: 'ref', name, place };
}

/** A set of alternatives that matches nothing (the empty language). */
export const NOTHING: Expr = { t: 'alt', items: [] };
