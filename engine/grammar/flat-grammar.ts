// The byte-level grammar the recognizer runs: every rule is a list of alternatives, every
// alternative a run of positions in one flat array ending in END. A position is either a byte
// class (one input byte from a 256-entry set) or a reference to a rule.

export const END = 0;
export const BYTES = 1;
export const REF = 2;

export interface FlatGrammar {
  /** END, BYTES or REF per position. */
  kind: Uint8Array;
  /** Byte-set id for BYTES, rule id for REF. */
  arg: Int32Array;
  /** Byte-set membership, 256 entries per set. */
  byteSets: Uint8Array;
  /** Start position of each alternative, per rule. */
  ruleAlts: number[][];
  ruleNames: string[];
  /** Where each rule came from, for messages. */
  rulePlaces: string[];
  root: number;
}

/**
 * The flat grammar as the recognizer needs it, all typed arrays: what a compile worker sends
 * back (transferred, not copied) and what the main thread builds its automaton from.
 * Alternatives of rule r are altStarts[ruleAltIndex[r] .. ruleAltIndex[r + 1]).
 */
export interface PackedGrammar {
  kind: Uint8Array;
  arg: Int32Array;
  byteSets: Uint8Array;
  altStarts: Int32Array;
  ruleAltIndex: Int32Array;
  root: number;
}

/** A packed grammar with its shortest-derivation tables (shortest-completion.ts). */
export interface GrammarTables extends PackedGrammar {
  /** Fewest bytes each rule derives (Infinity: none). */
  minLen: Float64Array;
  /** Start position of the alternative that derives them (-1: none). */
  bestAlt: Int32Array;
}

export function packGrammar(g: FlatGrammar): PackedGrammar {
  const n = g.ruleAlts.length;
  const ruleAltIndex = new Int32Array(n + 1);
  for (let r = 0; r < n; r++) ruleAltIndex[r + 1] = ruleAltIndex[r] + g.ruleAlts[r].length;
  const altStarts = new Int32Array(ruleAltIndex[n]);
  for (let r = 0, k = 0; r < n; r++) for (const s of g.ruleAlts[r]) altStarts[k++] = s;
  // Own buffers (not views into larger ones), so they can be transferred.
  return { kind: g.kind.slice(), arg: g.arg.slice(), byteSets: g.byteSets, altStarts, ruleAltIndex, root: g.root };
}
