// Automata written as grammar rules (a pattern's deterministic automaton, KBNF's #e/#ex): each
// alternative of such a rule reads one byte set and goes on in a rule by tail reference, or is
// empty. Which of those rules accept every run of string-safe characters is known from the
// grammar alone, before any recognizer state exists: an unanchored "contains one of these names"
// pattern accepts any safe text in every state before its match, though only the state after
// it loops. A recognizer state holding every reading alternative of such a rule under one parent
// is inside that rule, and accepts every safe run from there (popping out of it only adds
// parses), so a mask takes the safe tokens as a block there without exploring or building any
// state (Github_hard o48423, 30 game names: its first key was 32,000 trie nodes and 487 new states).

import { BYTES, END, PackedGrammar, REF } from './flat-grammar';
import { SafeRunCheck } from './safe-runs';

/** Per rule's answer (lazily checked). */
const UNKNOWN = 0;
const TAKES_ALL = 1;
const NOT_ALL = 2;

export class SafeRunRules {
  /** Per position: the rule whose reading alternative starts there, when that rule is automaton-shaped; else -1. */
  private ruleOfAlt: Int32Array;
  /** Per automaton-shaped rule: its reading alternatives. */
  private readingAlts = new Map<number, number>();
  /** Per rule: its row in `rows` when automaton-shaped, else -1. */
  private rowOf: Int32Array;
  /** 256 next rules per automaton-shaped rule (-1: byte refused, or taken by two alternatives). */
  private rows: Int32Array;
  private answers: Uint8Array;
  private check: SafeRunCheck;

  constructor(g: PackedGrammar) {
    const { kind, arg, byteSets, altStarts, ruleAltIndex } = g;
    const rules = ruleAltIndex.length - 1;
    this.ruleOfAlt = new Int32Array(kind.length).fill(-1);
    // A position starting alternatives of two rules would be one stack node for both: counted for neither.
    const starts = new Uint8Array(kind.length);
    for (let k = 0; k < altStarts.length; k++) starts[altStarts[k]]++;
    this.answers = new Uint8Array(rules);
    this.rowOf = new Int32Array(rules).fill(-1);
    const rows: Int32Array[] = [];
    for (let r = 0; r < rules; r++) {
      let shaped = true;
      for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1] && shaped; k++) {
        const p = altStarts[k];
        shaped = kind[p] === END || (kind[p] === BYTES && kind[p + 1] === REF && kind[p + 2] === END);
      }
      if (!shaped) continue;
      const row = new Int32Array(256).fill(-1);
      const taken = new Uint8Array(256);
      let reading = 0;
      for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1]; k++) {
        const p = altStarts[k];
        if (kind[p] === END) continue;
        reading++;
        if (starts[p] === 1) this.ruleOfAlt[p] = r;
        for (let b = 0, at = arg[p] * 256; b < 256; b++) {
          if (!byteSets[at + b]) continue;
          // Two alternatives on one byte: not deterministic; the check below then says no.
          row[b] = taken[b] ? -1 : arg[p + 1];
          taken[b] = 1;
        }
      }
      this.rowOf[r] = rows.length;
      rows.push(row);
      this.readingAlts.set(r, reading);
    }
    this.rows = new Int32Array(rows.length * 256);
    rows.forEach((row, k) => this.rows.set(row, k * 256));
    const { rowOf } = this;
    this.check = new SafeRunCheck({ next: (r, b) => (rowOf[r] < 0 ? -1 : this.rows[rowOf[r] * 256 + b]) });
  }

  /** Every run of safe characters is accepted from rule r (false for a rule not shaped as an automaton). */
  takesEverySafeRun(r: number): boolean {
    if (this.answers[r] === UNKNOWN) this.answers[r] = this.rowOf[r] >= 0 && this.check.takesEverySafeRun(r) ? TAKES_ALL : NOT_ALL;
    return this.answers[r] === TAKES_ALL;
  }

  /**
   * Some rule that takes every safe run has all of its reading alternatives among `stacks`
   * (node ids, whose top positions and parents `top` and `rest` give) over one same parent.
   */
  holdsWholeRule(stacks: ArrayLike<number>, top: (node: number) => number, rest: (node: number) => number): boolean {
    let counts: Map<number, number> | null = null;
    const rules = this.answers.length;
    for (let k = 0; k < stacks.length; k++) {
      const n = stacks[k];
      // Node 0 is the empty stack, node 1 the context marker: no position.
      if (n <= 1) continue;
      const r = this.ruleOfAlt[top(n)];
      if (r < 0 || !this.takesEverySafeRun(r)) continue;
      // Hash-consed nodes: one per (alternative, parent), so counting them counts alternatives.
      const key = rest(n) * rules + r;
      const c = ((counts ??= new Map()).get(key) ?? 0) + 1;
      if (c === this.readingAlts.get(r)) return true;
      counts.set(key, c);
    }
    return false;
  }
}
