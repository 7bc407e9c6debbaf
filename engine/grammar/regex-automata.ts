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
 * has more than `maxStates` states (the caller keeps the expression as it is). The language is the
 * same; what changes is the recognizer's work: an unanchored JSON Schema `pattern` (`.+` is
 * `.*.+.*`) is one parse per way to split the text so far (24 at a string's first character, 49
 * after two), and every mask walks the vocabulary once per parse; as a deterministic automaton it
 * is one parse, and a state that loops on every character takes the string-safe tokens as a block.
 */
export function deterministicRegex(regex: Expr, name: string, place: string, maxStates: number): DerivedTerminal | null {
  const a = regexAutomaton(regex, place);
  // A local budget: going over it only means the expression stays as written.
  const budget: Budget = { automatonStates: LIMITS.automatonStates - maxStates, automatonParses: 0, substringChars: 0 };
  try {
    return writeRules(a, name, place, budget, { accepting: (s) => a.accepting(s), edges: (s) => liveEdges(a, s) });
  } catch (e) {
    if (e instanceof ConstraintError) return null;
    throw e;
  }
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
