// Canonical decimal numbers (no exponent, no trailing fraction zeros, as JSON.stringify writes
// them in the usual range) whose value lies within bounds, exactly, including fractional
// bounds such as `minimum: 1.1` or `exclusiveMaximum: 0.25`. Works on the digit strings of the
// bounds, so no floating-point rounding enters the grammar.

import { ConstraintError } from './constraint-error';
import { alt, chars, EMPTY, Expr, lit, NOTHING, opt, rep, seq } from './grammar-ir';
import { uintRange } from './json-text';

const DIGIT = chars([0x30, 0x39]);
const NONZERO = chars([0x31, 0x39]);
/** Fraction digits after a non-zero digit: may stop, or go on and end non-zero. */
const FREE_AFTER_NONZERO = opt(seq(rep(DIGIT, 0, Infinity), NONZERO));
/** Fraction digits after a zero digit: must go on and end non-zero. */
const FREE_AFTER_ZERO = seq(rep(DIGIT, 0, Infinity), NONZERO);
/** Any canonical fraction part, dot included. */
const ANY_FRACTION = seq(lit('.'), rep(DIGIT, 0, Infinity), NONZERO);

/** A non-negative finite number as integer digits and fraction digits (no trailing zeros). */
interface Dec {
  int: number;
  frac: string;
}

/** Exact decimal digits of a double (its shortest round-trip form, exponent expanded). */
export function toDec(x: number, place: string): Dec {
  if (!Number.isFinite(x) || x < 0) throw new Error('toDec: expects a finite non-negative number');
  const [mant, expText] = String(x).split('e');
  const exp = expText ? Number(expText) : 0;
  const [ip, fp = ''] = mant.split('.');
  let digits = ip + fp;
  let point = ip.length + exp;
  if (point < 0) {
    digits = '0'.repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += '0'.repeat(point - digits.length);
  const int = digits.slice(0, point) || '0';
  const frac = digits.slice(point).replace(/0+$/, '');
  if (int.length > 16 || !Number.isSafeInteger(Number(int)))
    throw new ConstraintError('numeric bounds beyond 2^53 are not supported', place);
  return { int: Number(int), frac };
}

/**
 * Fraction digits (after the dot) strictly constrained by lower bound digits `lo` and upper
 * bound digits `hi` (null: that side already decided). `canEnd`: the digits so far end
 * non-zero, so the fraction may stop here.
 */
function fraction(lo: string | null, loStrict: boolean, hi: string | null, hiStrict: boolean, canEnd: boolean): Expr {
  const alts: Expr[] = [];
  // Stopping here leaves the rest equal to zero.
  const loOk = lo === null || (lo === '' && !loStrict);
  const hiOk = hi === null || !(hi === '' && hiStrict);
  if (canEnd && loOk && hiOk) alts.push(EMPTY);
  // A remaining upper bound of zero leaves no room for more (non-zero) digits.
  if (hi === '') return alts.length ? alt(...alts) : NOTHING;
  // A remaining lower bound of zero is met by any canonical continuation.
  const lower = lo === '' ? null : lo;
  const a = lower === null ? 0 : lower.charCodeAt(0) - 48;
  const b = hi === null ? 9 : hi.charCodeAt(0) - 48;
  const free = (d: number) => seq(chars([48 + d, 48 + d]), d === 0 ? FREE_AFTER_ZERO : FREE_AFTER_NONZERO);
  if (a === b) {
    if (lower === null && hi === null) return alt(...alts, free(a));
    alts.push(seq(chars([48 + a, 48 + a]), fraction(lower === null ? null : lower.slice(1), loStrict, hi === null ? null : hi.slice(1), hiStrict, a !== 0)));
    return alt(...alts);
  }
  if (a + 1 <= b - 1) alts.push(seq(chars([49 + a, 47 + b]), FREE_AFTER_NONZERO));
  alts.push(lower === null ? free(a) : seq(chars([48 + a, 48 + a]), fraction(lower.slice(1), loStrict, null, false, a !== 0)));
  alts.push(hi === null ? free(b) : seq(chars([48 + b, 48 + b]), fraction(null, false, hi.slice(1), hiStrict, b !== 0)));
  return alt(...alts);
}

/** Non-negative numbers v with L <= v (L < v if lx) and v <= H (v < H if hx); H null = no bound. */
function nonNegative(L: Dec, lx: boolean, H: Dec | null, hx: boolean): Expr {
  const parts: Expr[] = [];
  const intOnly = (ok: boolean) => (ok ? EMPTY : NOTHING);
  const dot = (e: Expr) => seq(lit('.'), e);
  if (H === null || L.int < H.int) {
    const midHi = H === null ? Infinity : H.int - 1;
    if (L.int + 1 <= midHi) parts.push(seq(uintRange(L.int + 1, midHi), opt(ANY_FRACTION)));
    parts.push(seq(lit(String(L.int)), alt(intOnly(L.frac === '' && !lx), dot(fraction(L.frac, lx, null, false, false)))));
    if (H !== null) parts.push(seq(lit(String(H.int)), alt(intOnly(!(hx && H.frac === '')), dot(fraction(null, false, H.frac, hx, false)))));
  } else if (L.int === H.int) {
    parts.push(
      seq(lit(String(L.int)), alt(intOnly(L.frac === '' && !lx && !(hx && H.frac === '')), dot(fraction(L.frac, lx, H.frac, hx, false)))),
    );
  }
  return alt(...parts);
}

/**
 * Numbers v with lo <= v <= hi (strict where exclusive), either bound possibly infinite, as
 * canonical decimals without exponent. "-0" is not produced.
 */
export function decimalRange(lo: number, loExcl: boolean, hi: number, hiExcl: boolean, place: string): Expr {
  const parts: Expr[] = [];
  // v >= 0
  if (hi >= 0) {
    const L = lo > 0 ? toDec(lo, place) : { int: 0, frac: '' };
    const lx = lo > 0 ? loExcl : lo === 0 && loExcl;
    parts.push(nonNegative(L, lx, hi === Infinity ? null : toDec(hi, place), hiExcl));
  }
  // v < 0, written "-" m with m > 0 and -m within the bounds.
  if (lo < 0) {
    const L = hi < 0 ? toDec(-hi, place) : { int: 0, frac: '' };
    const lx = hi < 0 ? hiExcl : true;
    parts.push(seq(lit('-'), nonNegative(L, lx, lo === -Infinity ? null : toDec(-lo, place), loExcl)));
  }
  return alt(...parts);
}
