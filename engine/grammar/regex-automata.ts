// KBNF's terminals that are not plain regular expressions, as kbnf defines them:
//  - #e"R"      early end: the texts R matches that no shorter prefix of theirs already matches
//               (kbnf stops the regex at its first match);
//  - #ex"R"     complement: the texts that contain no match of R anywhere (kbnf rejects a text
//               as soon as a match of R ends in it);
//  - #substrs"S" the substrings of S, the empty one included.
// The first two need the regex as a deterministic automaton: it is built over bytes by the same
// recognizer the constraints run on (the regex alone as a grammar), explored breadth-first up to
// LIMITS.automatonStates, cut as the form asks, and written back as one grammar rule per state.
// Substrings come from the string's suffix automaton (at most 2n states, all accepting).

import { LIMITS, overLimit } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { GrammarTables, packGrammar } from './flat-grammar';
import { chars, EMPTY, Expr, GrammarRule, ref, rep, seq, altOf } from './grammar-ir';
import { lowerGrammar } from './lower-grammar';
import { ANY_CHAR } from './regex-to-expr';
import { DEAD, StackAutomaton } from './stack-automaton';
import { SafeRunCheck } from './safe-runs';
import { holdsEverySafeChar, loopsOverSafeChars, safeCharSuccessors } from './string-slice';

/** What the derived terminals of one grammar have used so far, against their limits. */
export interface Budget {
  automatonStates: number;
  automatonParses: number;
  substringChars: number;
}

/** A derived terminal: an expression for its start and the rules it refers to. */
export interface DerivedTerminal {
  expr: Expr;
  rules: GrammarRule[];
}

/** #e"R": matches of R that end at their first match. */
export function earlyEndRegex(regex: Expr, name: string, place: string, budget: Budget): DerivedTerminal {
  const a = regexAutomaton(regex, place);
  return writeRules(a, name, place, budget, {
    accepting: (s) => a.accepting(s),
    // Once R has matched, the terminal is over.
    edges: (s) => (a.accepting(s) ? [] : liveEdges(a, s)),
  });
}

/** #ex"R": texts (whole characters) in which no match of R ends anywhere. */
export function regexComplement(regex: Expr, name: string, place: string, budget: Budget): DerivedTerminal {
  // A match of R ends at a point exactly when the text so far matches (any text) R.
  const a = regexAutomaton(seq(rep(chars(ANY_CHAR), 0, Infinity), regex), place);
  if (a.accepting(a.initial)) throw new ConstraintError('#ex"...": the regex matches the empty text, so every text contains a match', place);
  return writeRules(a, name, place, budget, {
    // Any text that stopped at a character boundary (where a new character could start) and
    // never passed a match.
    accepting: (s) => atCharBoundary(a, s),
    edges: (s) => liveEdges(a, s).filter(([, t]) => !a.accepting(t)),
  });
}

/**
 * A regular expression as the rules of its deterministic automaton, or null when that automaton
 * has more than `limits.states` states (each one explored is taken from `limits.budget.states`,
 * what one schema's patterns may explore together), or more than `limits.walked` states reached by safe
 * characters from which some run of safe characters is refused (the caller keeps the expression
 * as it is). The language is the same; what changes is the recognizer's work. An unanchored JSON
 * Schema `pattern` (`.+` is `.*.+.*`) is one parse per way to split the text so far (24 at a
 * string's first character, 49 after two), each a vocabulary walk per mask; as an automaton it is
 * one state, which takes the string-safe tokens as a block where it loops. Where no safe run is
 * refused (any state of an unanchored start: "contains one of these names", `[0-9]{4}` anywhere)
 * the block is taken too (safe-run-rules.ts). But a state that refuses some is a walk of the whole
 * vocabulary of its own (nothing shared with other states), so an anchored start that counts
 * (`^[0-9]{4}`: a state per digit) costs more than the parses it replaces (measured on
 * MaskBench's unanchored patterns, when only looping states took the block).
 */
export function deterministicRegex(
  regex: Expr,
  name: string,
  place: string,
  limits: { states: number; walked: number; budget: { states: number }; needsTaker?: boolean },
): DerivedTerminal | null {
  let a: StackAutomaton;
  try {
    a = regexAutomaton(regex, place);
  } catch (e) {
    if (e instanceof ConstraintError) return null;
    throw e;
  }
  const explored = exploreStates(a, Math.min(limits.states, limits.budget.states), limits.budget);
  if (!explored) return null;
  // The recognizer's states are sets of parses, not minimal: after `a` and after `a\u2028`, `.+`
  // anywhere is in two states that both accept anything. Merged, the one that accepts anything
  // loops on every character.
  const dfa = minimized(explored);
  if (!fewWalkedStates(dfa, limits.walked, limits.needsTaker ?? false)) return null;
  const rule = (k: number) => `${name}#${k}`;
  const rules: GrammarRule[] = [];
  for (let k = 0; k < dfa.accepting.length; k++) {
    const byTarget = new Map<number, number[]>();
    for (let b = 0; b < 256; b++) {
      const t = dfa.trans[k * 256 + b];
      if (t < 0) continue;
      const bytes = byTarget.get(t);
      if (bytes) bytes.push(b);
      else byTarget.set(t, [b]);
    }
    const alts: Expr[] = dfa.accepting[k] ? [EMPTY] : [];
    for (const [t, bytes] of byTarget) alts.push(seq({ t: 'bytes', ranges: byteRanges(bytes) }, ref(rule(t), place)));
    rules.push({ name: rule(k), place, body: altOf(alts) });
  }
  return { expr: ref(rule(0), place), rules };
}

/** A deterministic automaton as a table: state k's byte b leads to trans[k * 256 + b] (-1: refused); state 0 starts. */
interface DfaTable {
  trans: Int32Array;
  accepting: boolean[];
}

/** Every state reachable from the start, as a table; null past `most` states. Each state found is taken from `budget`. */
function exploreStates(a: StackAutomaton, most: number, budget: { states: number }): DfaTable | null {
  const index = new Map<number, number>([[a.initial, 0]]);
  const order = [a.initial];
  const rows: number[] = [];
  for (let k = 0; k < order.length; k++) {
    for (let b = 0; b < 256; b++) {
      const t = a.next(order[k], b);
      if (t === DEAD) {
        rows.push(-1);
        continue;
      }
      let id = index.get(t);
      if (id === undefined) {
        if (order.length >= most) return null;
        budget.states--;
        id = order.length;
        index.set(t, id);
        order.push(t);
      }
      rows.push(id);
    }
  }
  return { trans: Int32Array.from(rows), accepting: order.map((s) => a.accepting(s)) };
}

/** The minimal automaton of the same language (Moore's refinement: split by acceptance, then by where each byte leads, until stable). */
function minimized(d: DfaTable): DfaTable {
  const n = d.accepting.length;
  let cls: number[] = d.accepting.map((x) => (x ? 1 : 0));
  let count = new Set(cls).size;
  for (;;) {
    const sig = new Map<string, number>();
    const next = new Array<number>(n);
    for (let s = 0; s < n; s++) {
      const parts = [cls[s]];
      for (let b = 0; b < 256; b++) {
        const t = d.trans[s * 256 + b];
        parts.push(t < 0 ? -1 : cls[t]);
      }
      const key = parts.join(',');
      let c = sig.get(key);
      if (c === undefined) sig.set(key, (c = sig.size));
      next[s] = c;
    }
    cls = next;
    if (sig.size === count) break;
    count = sig.size;
  }
  // Renumbered so the start's class is 0.
  const renum = new Map<number, number>([[cls[0], 0]]);
  for (let s = 0; s < n; s++) if (!renum.has(cls[s])) renum.set(cls[s], renum.size);
  const m = renum.size;
  const trans = new Int32Array(m * 256).fill(-1);
  const accepting = new Array<boolean>(m).fill(false);
  for (let s = 0; s < n; s++) {
    const c = renum.get(cls[s])!;
    accepting[c] = d.accepting[s];
    for (let b = 0; b < 256; b++) {
      const t = d.trans[s * 256 + b];
      trans[c * 256 + b] = t < 0 ? -1 : renum.get(cls[t])!;
    }
  }
  return { trans, accepting };
}

/**
 * The expression repeats, without bound, a character class holding every safe character (`.*`,
 * `.+`, `[\s\S]*`): only then can an anchored pattern's automaton have a state that takes every
 * safe run without looping, so only then is it worth exploring (exploring `^[a-z0-9-]{1,255}$`
 * took 600-800 ms of compile time for nothing).
 */
export function repeatsAnySafeChar(expr: Expr): boolean {
  const todo: Expr[] = [expr];
  while (todo.length) {
    const e = todo.pop()!;
    if (e.t === 'rep') {
      if (e.max === Infinity && e.item.t === 'chars' && holdsEverySafeChar(e.item.set)) return true;
      todo.push(e.item);
    } else if (e.t === 'seq' || e.t === 'alt') todo.push(...e.items);
  }
  return false;
}

/** Safe ASCII characters a state may take and still be cheap to walk: the trie is cut at the first byte. */
const NARROW_STATE_CHARS = 8;

/**
 * At most `most` states reached from the start by safe characters refuse some run of safe
 * characters while taking more than a few of them (a state that takes a letter or two, as in a
 * literal prefix, prunes the walk at its first byte); and, with `needsTaker`, some state takes
 * every safe run without looping (where the expression's parses walk the whole vocabulary and
 * the automaton takes a block: `^file:.+\.km[lz]$` after `file:`).
 */
function fewWalkedStates(d: DfaTable, most: number, needsTaker: boolean): boolean {
  const a = { next: (s: number, b: number) => d.trans[s * 256 + b] };
  const runs = new SafeRunCheck(a);
  const seen = new Set<number>([0]);
  const todo = [0];
  let walked = 0;
  let taker = false;
  while (todo.length) {
    const s = todo.pop()!;
    if (runs.takesEverySafeRun(s)) {
      taker ||= !loopsOverSafeChars(a, s);
      continue;
    }
    if (asciiTaken(a, s) > NARROW_STATE_CHARS && ++walked > most) return false;
    const next = safeCharSuccessors(a, s);
    if (!next) return false;
    for (const t of next)
      if (!seen.has(t)) {
        seen.add(t);
        todo.push(t);
      }
  }
  return taker || !needsTaker;
}

/** How many safe ASCII characters the state takes. */
function asciiTaken(a: { next(s: number, b: number): number }, s: number): number {
  let n = 0;
  for (let b = 0x20; b < 0x80; b++) if (b !== 0x22 && b !== 0x5c && a.next(s, b) >= 0) n++;
  return n;
}

/** #substrs"S": every substring of S (empty included), as S's suffix automaton. */
export function substrings(text: string, name: string, place: string, budget: Budget): DerivedTerminal {
  const cps = Array.from(text, (c) => c.codePointAt(0)!);
  budget.substringChars += cps.length;
  if (budget.substringChars > LIMITS.substringChars)
    throw overLimit('the characters of #substrs strings', budget.substringChars, LIMITS.substringChars, place);
  const next: Map<number, number>[] = [new Map()];
  const link: number[] = [-1];
  const len: number[] = [0];
  let last = 0;
  for (const c of cps) {
    const cur = next.length;
    next.push(new Map());
    link.push(0);
    len.push(len[last] + 1);
    let p = last;
    while (p >= 0 && !next[p].has(c)) {
      next[p].set(c, cur);
      p = link[p];
    }
    if (p >= 0) {
      const q = next[p].get(c)!;
      if (len[p] + 1 === len[q]) link[cur] = q;
      else {
        const clone = next.length;
        next.push(new Map(next[q]));
        link.push(link[q]);
        len.push(len[p] + 1);
        while (p >= 0 && next[p].get(c) === q) {
          next[p].set(c, clone);
          p = link[p];
        }
        link[q] = clone;
        link[cur] = clone;
      }
    }
    last = cur;
  }
  const rule = (s: number) => `${name}#${s}`;
  const rules: GrammarRule[] = next.map((edges, s) => ({
    name: rule(s),
    place,
    body: altOf([EMPTY, ...[...edges].map(([c, t]) => seq(chars([c, c]), ref(rule(t), place)))]),
  }));
  return { expr: ref(rule(0), place), rules };
}

/** The regex alone as a grammar, run by the recognizer. */
function regexAutomaton(regex: Expr, place: string): StackAutomaton {
  const flat = lowerGrammar({ rules: new Map([['re', { name: 're', body: regex, place }]]), root: 're' });
  const packed = packGrammar(flat);
  // Shortest-derivation tables are not used to explore states.
  const tables: GrammarTables = { ...packed, minLen: new Float64Array(0), bestAlt: new Int32Array(0) };
  return new StackAutomaton(tables);
}

function liveEdges(a: StackAutomaton, s: number): [number, number][] {
  const out: [number, number][] = [];
  for (let b = 0; b < 256; b++) {
    const t = a.next(s, b);
    if (t !== DEAD) out.push([b, t]);
  }
  return out;
}

/** No byte that continues a UTF-8 sequence (0x80-0xBF) is expected next: a character may end here. */
function atCharBoundary(a: StackAutomaton, s: number): boolean {
  for (let b = 0x80; b < 0xc0; b++) if (a.next(s, b) !== DEAD) return false;
  return true;
}

/**
 * One rule per reachable state, `name#k`: empty where the text may end, and for each state the
 * bytes lead to, those bytes then that state's rule. Exploration stops with an error past
 * LIMITS.automatonStates (a regex's automaton can be exponentially larger than the regex).
 */
function writeRules(
  a: StackAutomaton,
  name: string,
  place: string,
  budget: Budget,
  form: { accepting: (s: number) => boolean; edges: (s: number) => [number, number][] },
): DerivedTerminal {
  budget.automatonStates++;
  const index = new Map<number, number>([[a.initial, 0]]);
  const order = [a.initial];
  const rules: GrammarRule[] = [];
  const rule = (k: number) => `${name}#${k}`;
  for (let k = 0; k < order.length; k++) {
    const s = order[k];
    const byTarget = new Map<number, number[]>();
    for (const [b, t] of form.edges(s)) {
      let id = index.get(t);
      if (id === undefined) {
        if (++budget.automatonStates > LIMITS.automatonStates)
          throw overLimit("the automaton states of the grammar's #e/#ex regexes", budget.automatonStates, LIMITS.automatonStates, place);
        // A state of many parses costs as much to explore as many states.
        budget.automatonParses += a.stackCount(t);
        if (budget.automatonParses > LIMITS.automatonParses)
          throw overLimit("the parses in the automaton states of the grammar's #e/#ex regexes", budget.automatonParses, LIMITS.automatonParses, place);
        id = order.length;
        index.set(t, id);
        order.push(t);
      }
      const bytes = byTarget.get(id);
      if (bytes) bytes.push(b);
      else byTarget.set(id, [b]);
    }
    const alts: Expr[] = form.accepting(s) ? [EMPTY] : [];
    for (const [id, bytes] of byTarget) alts.push(seq({ t: 'bytes', ranges: byteRanges(bytes) }, ref(rule(id), place)));
    rules.push({ name: rule(k), place, body: altOf(alts) });
  }
  return { expr: ref(rule(0), place), rules };
}

function byteRanges(sorted: number[]): [number, number][] {
  const out: [number, number][] = [];
  for (const b of sorted) {
    const last = out[out.length - 1];
    if (last && last[1] === b - 1) last[1] = b;
    else out.push([b, b]);
  }
  return out;
}
