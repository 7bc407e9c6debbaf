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
  /**
   * Per automaton-shaped rule's reading alternative: its start position → the rule (-1 when two
   * rules start an alternative there: one stack node for both, counted for neither).
   */
  private ruleOfAlt = new Map<number, number>();
  /** Per rule: its reading alternatives when automaton-shaped, else -1. */
  private readingAlts: Int32Array;
  /** Per rule: its row in `rows` once built (-1 before). */
  private rowOf: Int32Array;
  /** 256 next rules per rule explored (-1: byte refused, or taken by two alternatives), built on use. */
  private rows: Int32Array[] = [];
  private answers: Uint8Array;
  private check: SafeRunCheck;

  constructor(private readonly g: PackedGrammar) {
    const { kind, altStarts, ruleAltIndex } = g;
    const rules = ruleAltIndex.length - 1;
    this.answers = new Uint8Array(rules);
    this.rowOf = new Int32Array(rules).fill(-1);
    this.readingAlts = new Int32Array(rules).fill(-1);
    for (let r = 0; r < rules; r++) {
      let shaped = true;
      let reading = 0;
      for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1] && shaped; k++) {
        const p = altStarts[k];
        shaped = kind[p] === END || (kind[p] === BYTES && kind[p + 1] === REF && kind[p + 2] === END);
        if (kind[p] === BYTES) reading++;
      }
      if (!shaped) continue;
      this.readingAlts[r] = reading;
      for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1]; k++) {
        const p = altStarts[k];
        if (kind[p] !== BYTES) continue;
        const other = this.ruleOfAlt.get(p);
        this.ruleOfAlt.set(p, other === undefined || other === r ? r : -1);
      }
    }
    this.check = new SafeRunCheck({ next: (r, b) => this.next(r, b) });
  }

  /** The rule an automaton-shaped rule goes on in after byte b; -1 when refused, not one way, or not shaped. */
  private next(r: number, b: number): number {
    if (r < 0 || r >= this.rowOf.length || this.readingAlts[r] < 0) return -1;
    let at = this.rowOf[r];
    if (at < 0) {
      const { kind, arg, byteSets, altStarts, ruleAltIndex } = this.g;
      const row = new Int32Array(256).fill(-1);
      const taken = new Uint8Array(256);
      for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1]; k++) {
        const p = altStarts[k];
        if (kind[p] !== BYTES) continue;
        for (let c = 0, set = arg[p] * 256; c < 256; c++) {
          if (!byteSets[set + c]) continue;
          // Two alternatives on one byte: not deterministic; the check then says no.
          row[c] = taken[c] ? -1 : arg[p + 1];
          taken[c] = 1;
        }
      }
      at = this.rowOf[r] = this.rows.length;
      this.rows.push(row);
    }
    return this.rows[at][b];
  }

  /** Every run of safe characters is accepted from rule r (false for a rule not shaped as an automaton). */
  takesEverySafeRun(r: number): boolean {
    if (this.answers[r] === UNKNOWN) this.answers[r] = this.readingAlts[r] >= 0 && this.check.takesEverySafeRun(r) ? TAKES_ALL : NOT_ALL;
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
      const r = this.ruleOfAlt.get(top(n));
      if (r === undefined || r < 0 || !this.takesEverySafeRun(r)) continue;
      // Hash-consed nodes: one per (alternative, parent), so counting them counts alternatives.
      const key = rest(n) * rules + r;
      const c = ((counts ??= new Map()).get(key) ?? 0) + 1;
      if (c === this.readingAlts[r]) return true;
      counts.set(key, c);
    }
    return false;
  }
}
