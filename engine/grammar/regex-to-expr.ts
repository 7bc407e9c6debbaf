// A regular expression (the ECMAScript subset JSON Schema's `pattern` and KBNF's #"..."
// terminals use) turned into a grammar expression over code points. Features a context-free
// grammar cannot express or that need the match history (back-references, lookaround, word
// boundaries) are refused with the offset of the construct.

import { LIMITS } from './compile-limits';
import { ConstraintError } from './constraint-error';
import {
  asciiCaseFold,
  CodePointSet,
  complementSet,
  MAX_CODE_POINT,
  normalizeSet,
  singleton,
} from './code-point-set';
import { altOf, chars, EMPTY, Expr, rep, seqOf } from './grammar-ir';

export interface RegexBranch {
  expr: Expr;
  /** The branch began with ^ (so a search does not float at the start). */
  anchoredStart: boolean;
  anchoredEnd: boolean;
}

const DIGIT: CodePointSet = [0x30, 0x39];
const WORD: CodePointSet = normalizeSet([0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a]);
const SPACE: CodePointSet = normalizeSet([
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x202f, 0x205f, 0x205f,
  0x3000, 0x3000, 0xfeff, 0xfeff,
]);
const LINE_TERMINATORS: CodePointSet = normalizeSet([0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029]);
export const ANY_BUT_NEWLINE: CodePointSet = complementSet(LINE_TERMINATORS);
/** `.` of Rust's regex crate (kbnf's regexes): every character but \n. */
const ANY_BUT_LF: CodePointSet = complementSet([0x0a, 0x0a]);
export const ANY_CHAR: CodePointSet = normalizeSet([0, MAX_CODE_POINT]);

/** Parses a regex into its top-level alternatives, each with its anchors. */
export function regexBranches(source: string, flags = '', place = 'regex'): RegexBranch[] {
  return new RegexParser(source, flags, place).parseTop();
}

/** A regex that must match the whole text (anchors at the ends are allowed and ignored). */
export function regexFullMatch(source: string, flags = '', place = 'regex'): Expr {
  return altOf(regexBranches(source, flags, place).map((b) => b.expr));
}

class RegexParser {
  private cps: number[];
  private i = 0;
  private ignoreCase: boolean;
  private dot: CodePointSet;
  /** Groups open around the current position. */
  private nesting = 0;

  constructor(private source: string, flags: string, private place: string) {
    this.cps = Array.from(source, (c) => c.codePointAt(0)!);
    // 'r' is ours: the regex is read as Rust's regex crate reads it (kbnf), where `.` is any
    // character but \n rather than any but the four ECMAScript line terminators.
    for (const f of flags) if (!'iur'.includes(f)) this.fail(`regex flag '${f}' is not supported`);
    this.ignoreCase = flags.includes('i');
    this.dot = flags.includes('r') ? ANY_BUT_LF : ANY_BUT_NEWLINE;
  }

  private fail(msg: string): never {
    throw new ConstraintError(`${msg} in regex ${JSON.stringify(this.source)}`, `${this.place}, offset ${this.i}`);
  }

  private peek(k = 0): number {
    return this.i + k < this.cps.length ? this.cps[this.i + k] : -1;
  }

  private eat(c: string): boolean {
    if (this.peek() === c.codePointAt(0)) {
      this.i++;
      return true;
    }
    return false;
  }

  parseTop(): RegexBranch[] {
    const branches: RegexBranch[] = [];
    for (;;) {
      const anchoredStart = this.eat('^');
      const items = this.parseAlternative(true);
      let anchoredEnd = false;
      if (this.eat('$')) anchoredEnd = true;
      branches.push({ expr: seqOf(items), anchoredStart, anchoredEnd });
      if (this.eat('|')) continue;
      if (this.i < this.cps.length) this.fail(this.peek() === 0x29 ? "unbalanced ')'" : 'anchor ^ or $ only allowed at the ends');
      return branches;
    }
  }

  private parseDisjunction(): Expr {
    const alts: Expr[] = [seqOf(this.parseAlternative(false))];
    while (this.eat('|')) alts.push(seqOf(this.parseAlternative(false)));
    return alts.length === 1 ? alts[0] : { t: 'alt', items: alts };
  }

  private parseAlternative(top: boolean): Expr[] {
    const items: Expr[] = [];
    for (;;) {
      const c = this.peek();
      if (c < 0 || c === 0x7c /* | */ || c === 0x29 /* ) */) return items;
      if (c === 0x24 /* $ */) {
        if (top && this.i === this.cps.length - 1) return items;
        if (top && this.peek(1) === 0x7c) return items;
        this.fail('anchor $ inside the pattern is not supported');
      }
      if (c === 0x5e /* ^ */) this.fail('anchor ^ inside the pattern is not supported');
      const atom = this.parseAtom();
      items.push(this.parseQuantifier(atom));
    }
  }

  private parseQuantifier(atom: Expr): Expr {
    let min: number, max: number;
    const c = this.peek();
    if (c === 0x2a) [min, max] = [0, Infinity];
    else if (c === 0x2b) [min, max] = [1, Infinity];
    else if (c === 0x3f) [min, max] = [0, 1];
    else if (c === 0x7b) {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(String.fromCodePoint(...this.cps.slice(this.i, this.i + 24)));
      if (!m) return atom; // a literal '{' (Annex B)
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      if (max < min) this.fail('quantifier {n,m} with m < n');
      const count = max === Infinity ? min : max;
      if (count > LIMITS.repeat) this.fail(`quantifier ${m[0]}: the count ${count} is above the limit of ${LIMITS.repeat}`);
      this.i += m[0].length - 1;
    } else return atom;
    this.i++;
    this.eat('?'); // lazy and greedy match the same language
    if (this.peek() === 0x2a || this.peek() === 0x2b || this.peek() === 0x3f) this.fail('nothing to repeat');
    return rep(atom, min, max);
  }

  private charsExpr(set: CodePointSet): Expr {
    return chars(this.ignoreCase ? asciiCaseFold(set) : set);
  }

  private parseAtom(): Expr {
    const c = this.cps[this.i++];
    switch (c) {
      case 0x2e: // .
        return chars(this.dot);
      case 0x5b: // [
        return this.charsExpr(this.parseClass());
      case 0x28: {
        // (
        if (this.eat('?')) {
          if (this.eat(':')) {
            /* non-capturing */
          } else if (this.peek() === 0x3c && this.peek(1) !== 0x3d && this.peek(1) !== 0x21) {
            // (?<name>
            while (this.i < this.cps.length && this.cps[this.i] !== 0x3e) this.i++;
            this.i++;
          } else this.fail('lookaround assertions are not supported');
        }
        if (++this.nesting > LIMITS.nesting) this.fail(`groups nested deeper than ${LIMITS.nesting} levels`);
        const inner = this.parseDisjunction();
        this.nesting--;
        if (!this.eat(')')) this.fail("missing ')'");
        return inner;
      }
      case 0x5c: // backslash
        return this.parseAtomEscape();
      case 0x2a:
      case 0x2b:
      case 0x3f:
        this.i--;
        this.fail('nothing to repeat');
      // eslint-disable-next-line no-fallthrough
      default:
        return this.charsExpr(singleton(c));
    }
  }

  private parseAtomEscape(): Expr {
    const c = this.peek();
    if (c === 0x62 || c === 0x42) this.fail('word boundary \\b/\\B is not supported');
    if (c === 0x41 || c === 0x7a) {
      // \A, \z (Rust-style anchors in KBNF regexes) at the ends match the whole-text rule already.
      this.i++;
      if ((c === 0x41 && this.i === 2) || (c === 0x7a && this.i === this.cps.length)) return EMPTY;
      this.fail('anchor inside the pattern is not supported');
    }
    if (c >= 0x31 && c <= 0x39) this.fail('back-references are not supported');
    if (c === 0x6b && this.peek(1) === 0x3c) this.fail('named back-references are not supported');
    return this.charsExpr(this.parseEscape(false));
  }

  /** The code points of an escape (after the backslash). */
  private parseEscape(inClass: boolean): CodePointSet {
    const c = this.cps[this.i++];
    if (c === undefined) this.fail('pattern ends with a backslash');
    switch (c) {
      case 0x64: return DIGIT; // d
      case 0x44: return complementSet(DIGIT);
      case 0x77: return WORD; // w
      case 0x57: return complementSet(WORD);
      case 0x73: return SPACE; // s
      case 0x53: return complementSet(SPACE);
      case 0x6e: return singleton(0x0a);
      case 0x72: return singleton(0x0d);
      case 0x74: return singleton(0x09);
      case 0x66: return singleton(0x0c);
      case 0x76: return singleton(0x0b);
      case 0x30: return singleton(0);
      case 0x62:
        if (inClass) return singleton(0x08);
        break;
      case 0x63: {
        const l = this.cps[this.i++];
        if (l === undefined || !/[A-Za-z]/.test(String.fromCodePoint(l))) this.fail('bad control escape \\c');
        return singleton(l % 32);
      }
      case 0x78: {
        const h = String.fromCodePoint(...this.cps.slice(this.i, this.i + 2));
        if (!/^[0-9a-fA-F]{2}$/.test(h)) this.fail('bad \\x escape');
        this.i += 2;
        return singleton(parseInt(h, 16));
      }
      case 0x75: {
        if (this.peek() === 0x7b) {
          const end = this.cps.indexOf(0x7d, this.i);
          const h = String.fromCodePoint(...this.cps.slice(this.i + 1, end < 0 ? this.i + 1 : end));
          if (end < 0 || !/^[0-9a-fA-F]{1,6}$/.test(h) || parseInt(h, 16) > MAX_CODE_POINT) this.fail('bad \\u{...} escape');
          this.i = end + 1;
          return singleton(parseInt(h, 16));
        }
        const h = String.fromCodePoint(...this.cps.slice(this.i, this.i + 4));
        if (!/^[0-9a-fA-F]{4}$/.test(h)) this.fail('bad \\u escape');
        this.i += 4;
        let cp = parseInt(h, 16);
        // A surrogate pair written as two escapes is one code point.
        if (cp >= 0xd800 && cp <= 0xdbff && this.peek() === 0x5c && this.peek(1) === 0x75) {
          const l = String.fromCodePoint(...this.cps.slice(this.i + 2, this.i + 6));
          const lo = /^[0-9a-fA-F]{4}$/.test(l) ? parseInt(l, 16) : 0;
          if (lo >= 0xdc00 && lo <= 0xdfff) {
            this.i += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
        }
        if (cp >= 0xd800 && cp <= 0xdfff) this.fail('lone surrogate escapes cannot be matched');
        return singleton(cp);
      }
      case 0x70:
      case 0x50:
        this.fail('Unicode property escapes \\p{...} are not supported');
    }
    return singleton(c);
  }

  private parseClass(): CodePointSet {
    const negated = this.eat('^');
    const parts: CodePointSet[] = [];
    let first = true;
    for (;;) {
      if (this.i >= this.cps.length) this.fail("missing ']'");
      if (this.peek() === 0x5d && !first) {
        this.i++;
        break;
      }
      if (this.peek() === 0x5d && first) {
        // `[]` matches nothing, `[^]` anything (ECMAScript).
        this.i++;
        return negated ? ANY_CHAR : [];
      }
      first = false;
      const lo = this.classAtom();
      if (this.peek() === 0x2d && this.peek(1) !== 0x5d && this.peek(1) !== -1) {
        this.i++;
        const hi = this.classAtom();
        if (lo.length !== 2 || lo[0] !== lo[1] || hi.length !== 2 || hi[0] !== hi[1]) this.fail('bad class range');
        if (hi[0] < lo[0]) this.fail('class range out of order');
        parts.push([lo[0], hi[0]]);
      } else parts.push(lo);
    }
    const set = normalizeSet(parts.flat());
    return negated ? complementSet(this.ignoreCase ? asciiCaseFold(set) : set) : set;
  }

  private classAtom(): CodePointSet {
    const c = this.cps[this.i++];
    if (c === 0x5c) return this.parseEscape(true);
    return singleton(c);
  }
}
