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
