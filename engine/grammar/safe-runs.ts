// Whether a state accepts every run of whole string-safe characters (string-slice.ts), so a mask
// walk may take every safe token below it as a block. Inside a plain string the state loops on
// each such character. An unanchored "contains one of these names" pattern does not loop before
// its match (each letter of a name leads on to the next state of its Aho–Corasick automaton),
// yet refuses no safe character in any of those states: every safe text is still a prefix of a
// matching one. Walked node by node, its first key was 32,000 trie nodes and 487 new states as an
// expression (Github_hard o48423, 30 game names: 50–80 ms), or the whole 116,000-node safe trie as an
// automaton. Checked here by exploring the states the safe characters reach, up to a bound.

import { ByteAutomaton, safeCharSequences } from './string-slice';

/**
 * Most states one check explores. Past it the state is walked node by node, as any state that
 * refuses a safe character is (exact either way; only the work differs).
 */
export const MAX_SAFE_RUN_STATES = 1024;

const UNKNOWN = 0;
/** Every run of safe characters from the state is accepted. */
const TAKES_ALL = 1;
/** Some run is refused, or the check gave up at the bound. */
const NOT_ALL = 2;

/** Per-state answers of one automaton, kept as the automaton grows. */
export class SafeRunCheck {
  private flags = new Uint8Array(1024);
  /** States explored by every check so far (for tests: the work done). */
  explored = 0;

  constructor(private readonly a: ByteAutomaton) {}

  /**
   * Every run of whole safe characters read from `state` is accepted: every state such runs
   * reach (itself included) accepts each safe character. A state answered once keeps its
   * answer; a failed check marks the states on the way to the refusing one (they reach it), and
   * one that gave up marks every state it explored, so a long chain of states is explored once.
   */
  takesEverySafeRun(state: number): boolean {
    const known = this.flag(state);
    if (known !== UNKNOWN) return known === TAKES_ALL;
    const order = [state];
    const parentOf = new Map<number, number>([[state, -1]]);
    for (let k = 0; k < order.length; k++) {
      const s = order[k];
      const f = this.flag(s);
      // A state already known to take every run needs no exploring below it.
      if (f === TAKES_ALL) continue;
      const next = f === NOT_ALL ? null : this.successors(s);
      if (!next) {
        // s, and every state on the way to it, reaches a refused run.
        for (let p = s; p >= 0; p = parentOf.get(p)!) this.mark(p, NOT_ALL);
        return false;
      }
      for (const t of next) {
        if (parentOf.has(t)) continue;
        if (order.length >= MAX_SAFE_RUN_STATES) {
          for (const x of order) if (this.flag(x) === UNKNOWN) this.mark(x, NOT_ALL);
          return false;
        }
        parentOf.set(t, s);
        order.push(t);
      }
    }
    for (const x of order) this.mark(x, TAKES_ALL);
    return true;
  }

  /** The states one safe character leads to from `s`, or null when some safe character is refused there. */
  private successors(s: number): number[] | null {
    this.explored++;
    const out: number[] = [];
    const seqs = safeCharSequences();
    for (let i = 0; i < seqs.length; i++) {
      const ends = this.readRest(s, i, 0);
      if (!ends) return null;
      for (const t of ends) if (!out.includes(t)) out.push(t);
    }
    return out;
  }

  /**
   * Per (state, sequence, byte position): the states reading the rest of the sequence leads to.
   * The states inside a character (after its first byte) are few and shared by many states
   * before it: their continuation bytes are read once, not again from each.
   */
  private rests = new Map<number, number[] | null>();

  /** The states reading bytes `j..` of safe sequence `i` leads to from `x`; null when one is refused. */
  private readRest(x: number, i: number, j: number): number[] | null {
    const seq = safeCharSequences()[i];
    if (j === seq.length) return [x];
    const key = (x * 16 + i) * 4 + j;
    const known = this.rests.get(key);
    if (known !== undefined) return known;
    const [lo, hi] = seq[j];
    const out: number[] = [];
    let last = -1;
    let refused = false;
    for (let b = lo; b <= hi && !refused; b++) {
      const t = this.a.next(x, b);
      if (t < 0) refused = true;
      // Bytes of one class lead where the byte before did: read on once.
      else if (t !== last) {
        last = t;
        const ends = this.readRest(t, i, j + 1);
        if (!ends) refused = true;
        else for (const e of ends) if (!out.includes(e)) out.push(e);
      }
    }
    const result = refused ? null : out;
    this.rests.set(key, result);
    return result;
  }

  private flag(state: number): number {
    return state < this.flags.length ? this.flags[state] : UNKNOWN;
  }

  private mark(state: number, f: number): void {
    if (state >= this.flags.length) {
      const grown = new Uint8Array(Math.max(2 * this.flags.length, state + 1024));
      grown.set(this.flags);
      this.flags = grown;
    }
    this.flags[state] = f;
  }
}
