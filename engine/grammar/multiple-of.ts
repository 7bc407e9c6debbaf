// `multipleOf` an integer k, as a grammar of canonical integers. ajv checks it in floating point
// (data / k === parseInt(data / k)), which is exact for plain integers below 10^15, so values stay
// within 15 digits. A bounded range with few multiples is listed (a prefix tree of their
// digits); a half line or the whole line is a digit automaton over remainders mod k, one rule
// per (remainder, digits left), for k up to MAX_MODULUS.

import { LIMITS } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { normalizeSet } from './code-point-set';
import { alt, altOf, chars, EMPTY, Expr, lit, seq } from './grammar-ir';
import { asciiStringSet } from './json-text';

/** Digits of the largest value written: ajv's check is exact below 2^53. */
const MAX_DIGITS = 15;
const LARGEST = 10 ** MAX_DIGITS - 1;
/** Largest k whose remainder automaton is built (k x 15 rules). */
export const MAX_MODULUS = 100;

/** Makes (once) a rule of the grammar being built and returns a reference to it. */
export type RuleMaker = (name: string, make: () => Expr) => Expr;

export function multiplesExpr(k: number, lo: number, hi: number, place: string, rule: RuleMaker): Expr | null {
  const a = Math.max(lo, -LARGEST), b = Math.min(hi, LARGEST);
  const first = Math.ceil(a / k), last = Math.floor(b / k);
  if (first > last) return null;
  if (last - first < LIMITS.properties) {
    const texts: string[] = [];
    for (let n = first; n <= last; n++) texts.push(String(n * k === 0 ? 0 : n * k));
    return asciiStringSet(texts);
  }
  const alts: Expr[] = [];
  // Non-negative multiples: [max(lo, 0), hi] must be [0, LARGEST], or listable.
  if (b >= 0) {
    if (b === LARGEST && a <= 0) alts.push(remainderAutomaton(k, true, place, rule));
    else alts.push(listed(k, Math.max(a, 0), b, place));
  }
  if (a < 0) {
    // Negative multiples -n, n in [max(-b, 1), -a].
    const nLo = Math.max(-b, 1), nHi = -a;
    if (nHi === LARGEST && nLo <= k) alts.push(seq(lit('-'), remainderAutomaton(k, false, place, rule)));
    else alts.push(seq(lit('-'), listed(k, nLo, nHi, place)));
  }
  return altOf(alts);
}

function listed(k: number, lo: number, hi: number, place: string): Expr {
  const first = Math.ceil(lo / k), last = Math.floor(hi / k);
  if (first > last) return { t: 'alt', items: [] };
  if (last - first >= LIMITS.properties)
    throw new ConstraintError(`multipleOf ${k} with bounds that allow more than ${LIMITS.properties} multiples on a side that is not open is not supported`, place);
  const texts: string[] = [];
  for (let n = first; n <= last; n++) texts.push(String(n * k));
  return asciiStringSet(texts);
}

/** Canonical integers of up to 15 digits divisible by k (zero included when `withZero`). */
function remainderAutomaton(k: number, withZero: boolean, place: string, rule: RuleMaker): Expr {
  if (k > MAX_MODULUS)
    throw new ConstraintError(`multipleOf ${k} without bounds is supported for integers up to ${MAX_MODULUS}`, place);
  // R(j, n): digits still to come (at most n) that bring remainder j to 0.
  const R = (j: number, n: number): Expr =>
    rule(`multiple-of-${k}:${j}:${n}`, () => {
      const alts: Expr[] = j === 0 ? [EMPTY] : [];
      if (n > 0) alts.push(...digitsTo(k, j, 0, (next) => R(next, n - 1)));
      return altOf(alts);
    });
  const first = altOf(digitsTo(k, 0, 1, (next) => R(next, MAX_DIGITS - 1)));
  return withZero ? alt(lit('0'), first) : first;
}

/** One alternative per next remainder: the digits (from `minDigit`) leading to it, then its rule. */
function digitsTo(k: number, j: number, minDigit: number, then: (next: number) => Expr): Expr[] {
  const byNext = new Map<number, number[]>();
  for (let d = minDigit; d <= 9; d++) {
    const next = (10 * j + d) % k;
    if (!byNext.has(next)) byNext.set(next, []);
    byNext.get(next)!.push(d);
  }
  const out: Expr[] = [];
  for (const [next, ds] of byNext) out.push(seq(chars(normalizeSet(ds.flatMap((d) => [48 + d, 48 + d]))), then(next)));
  return out;
}
