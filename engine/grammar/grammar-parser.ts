// Parses grammar text in either of the two dialects users bring, as their own tools read it:
//  - KBNF (kbnf, as ai00 uses it): `name ::= ... ;` (or `=`), '...' and "..." strings whose
//    escapes are kbnf's (\n \t \" \\ \u{..} \xHH \NNN ..., any other is an error) and which may
//    span lines, #"regex" (the escapes are read first, then the regex: #"\\d" is a digit),
//    #e"regex" (ends at its first match), #ex"regex" (texts with no match), #substrs"text",
//    [ optional ], { zero or more }, ( group ), postfix ? * +, comments (* ... *).
//  - GBNF (llama.cpp): `root ::= ...` one rule per line (continuations start with |),
//    [a-z] character classes, `.`, postfix ? * + {m} {m,} {m,n}, # comments, and llama.cpp's
//    escapes (\xHH \uHHHH \UHHHHHHHH \t \r \n \\ \" \[ \]).
// The dialect is recognised from the text: every KBNF rule ends in ';', GBNF rules never do.
// The root is the rule `root`, else `start`, else the first rule.

import { LIMITS, overLimit } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { CodePointSet, complementSet, MAX_CODE_POINT, normalizeSet, singleton } from './code-point-set';
import { chars, EMPTY, Expr, GrammarIR, GrammarRule, lit, ref, rep, seqOf } from './grammar-ir';
import { ANY_CHAR, regexFullMatch } from './regex-to-expr';
import { Budget, DerivedTerminal, earlyEndRegex, regexComplement, substrings } from './regex-automata';

export type GrammarDialect = 'kbnf' | 'gbnf';

export function detectDialect(text: string): GrammarDialect {
  // Strip strings, classes and comments roughly, then look at the last significant character.
  const stripped = text
    .replace(/\(\*[\s\S]*?\*\)/g, ' ')
    .replace(/"(?:[^"\\]|\\[\s\S])*"|'(?:[^'\\]|\\[\s\S])*'/g, '""')
    .replace(/(^|[^#])#(?!(?:e|ex|substrs)?["']).*$/gm, '$1')
    .trim();
  return stripped.endsWith(';') ? 'kbnf' : 'gbnf';
}

export function parseGrammar(text: string, dialect?: GrammarDialect): GrammarIR {
  if (text.length > LIMITS.grammarChars) throw overLimit('the grammar length (characters)', text.length, LIMITS.grammarChars);
  return new GrammarParser(text, dialect ?? detectDialect(text)).parse();
}

class GrammarParser {
  private i = 0;
  private rules = new Map<string, GrammarRule>();
  private order: string[] = [];
  /** Further definitions of an already defined rule (`a ::= x` then `a ::= y` means `a ::= x | y`). */
  private moreAlternatives = new Map<string, Expr[]>();
  /** Groups open around the current position. */
  private nesting = 0;
  /** Automaton states and substring characters KBNF's derived terminals have used. */
  private budget: Budget = { automatonStates: 0, automatonParses: 0, substringChars: 0 };
  /** Offset of each line's first character, for places (built on first use). */
  private lineStarts: number[] | null = null;

  constructor(private src: string, private dialect: GrammarDialect) {}

  private place(at = this.i): string {
    // A binary search over line starts: places are made per rule and reference, so a scan from
    // the start of the text each time would make parsing quadratic.
    if (!this.lineStarts) {
      this.lineStarts = [0];
      for (let k = 0; k < this.src.length; k++) if (this.src[k] === '\n') this.lineStarts.push(k + 1);
    }
    const starts = this.lineStarts;
    const pos = Math.min(at, this.src.length);
    let lo = 0, hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return `line ${lo + 1}, column ${pos - starts[lo] + 1}`;
  }

  private fail(msg: string, at = this.i): never {
    throw new ConstraintError(`grammar (${this.dialect.toUpperCase()}): ${msg}`, this.place(at));
  }

  private skipSpace(): void {
    for (;;) {
      const c = this.src[this.i];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r') this.i++;
      else if (c === '#' && !(this.dialect === 'kbnf' && this.isRegexStart())) {
        while (this.i < this.src.length && this.src[this.i] !== '\n') this.i++;
      } else if (c === '(' && this.src[this.i + 1] === '*' && this.dialect === 'kbnf') {
        const end = this.src.indexOf('*)', this.i + 2);
        if (end < 0) this.fail('unterminated comment (* ...');
        this.i = end + 2;
      } else if (c === '/' && this.src[this.i + 1] === '/') {
        while (this.i < this.src.length && this.src[this.i] !== '\n') this.i++;
      } else return;
    }
  }

  private isRegexStart(): boolean {
    return /^#(e|ex|substrs)?["']/.test(this.src.slice(this.i, this.i + 10));
  }

  private identAt(at: number): string | null {
    const m = /^[A-Za-z_][A-Za-z0-9_\-.]*/.exec(this.src.slice(at, at + 200));
    return m ? m[0] : null;
  }

  /** An identifier followed by ::= starts the next rule. */
  private atRuleStart(): boolean {
    const name = this.identAt(this.i);
    if (!name) return false;
    const rest = this.src.slice(this.i + name.length);
    return /^[ \t\r\n]*::=/.test(rest);
  }

  parse(): GrammarIR {
    this.skipSpace();
    while (this.i < this.src.length) {
      const start = this.i;
      const name = this.identAt(this.i);
      if (!name) this.fail(`expected a rule name, found ${JSON.stringify(this.src.slice(this.i, this.i + 12))}`);
      this.i += name.length;
      this.skipSpace();
      if (this.src.startsWith('::=', this.i)) this.i += 3;
      // kbnf also takes a plain '='.
      else if (this.dialect === 'kbnf' && this.src[this.i] === '=') this.i += 1;
      else this.fail(`expected '::=' after rule name '${name}'`);
      const body = this.parseAlternation();
      this.skipSpace();
      if (this.dialect === 'kbnf') {
        if (this.src[this.i] !== ';') this.fail(`expected ';' at the end of rule '${name}'`);
        this.i++;
      } else if (this.src[this.i] === ';') this.i++;
      this.skipSpace();
      const prev = this.rules.get(name);
      if (prev) {
        const more = this.moreAlternatives.get(name);
        if (more) more.push(body);
        else this.moreAlternatives.set(name, [body]);
      } else {
        if (this.order.length >= LIMITS.grammarRules)
          throw overLimit('the number of rules', this.order.length + 1, LIMITS.grammarRules, `rule '${name}', ${this.place(start)}`);
        this.rules.set(name, { name, body, place: `rule '${name}', ${this.place(start)}` });
        this.order.push(name);
      }
    }
    if (this.order.length === 0) this.fail('the grammar has no rules');
    // Merged once at the end: merging per definition would copy the list each time.
    for (const [name, bodies] of this.moreAlternatives) {
      const rule = this.rules.get(name)!;
      const items: Expr[] = [];
      for (const b of [rule.body, ...bodies]) {
        if (b.t === 'alt') for (const x of b.items) items.push(x);
        else items.push(b);
      }
      rule.body = { t: 'alt', items };
    }
    const root = this.rules.has('root') ? 'root' : this.rules.has('start') ? 'start' : this.order[0];
    return { rules: this.rules, root };
  }

  private parseAlternation(): Expr {
    const alts = [this.parseSequence()];
    for (;;) {
      this.skipSpace();
      if (this.src[this.i] !== '|') break;
      this.i++;
      alts.push(this.parseSequence());
    }
    return alts.length === 1 ? alts[0] : { t: 'alt', items: alts };
  }

  private parseSequence(): Expr {
    const items: Expr[] = [];
    for (;;) {
      this.skipSpace();
      const c = this.src[this.i];
      if (c === undefined || c === '|' || c === ')' || c === ';') break;
      if (this.dialect === 'kbnf' && (c === ']' || c === '}')) break;
      if (this.atRuleStart()) break;
      items.push(this.parsePostfix(this.parsePrimary()));
    }
    return seqOf(items);
  }

  private parsePostfix(e: Expr): Expr {
    for (;;) {
      const c = this.src[this.i];
      if (c === '*') e = rep(e, 0, Infinity);
      else if (c === '+') e = rep(e, 1, Infinity);
      else if (c === '?') e = rep(e, 0, 1);
      else if (c === '{' && this.dialect === 'gbnf') {
        const m = /^\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}/.exec(this.src.slice(this.i, this.i + 40));
        if (!m) this.fail("expected a repetition {m}, {m,} or {m,n}");
        const min = Number(m[1]);
        const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
        if (max < min) this.fail(`repetition {${min},${max}} has max below min`);
        const count = max === Infinity ? min : max;
        if (count > LIMITS.repeat) this.fail(`repetition ${m[0].replace(/\s+/g, '')}: the count ${count} is above the limit of ${LIMITS.repeat}`);
        e = rep(e, min, max);
        this.i += m[0].length - 1;
      } else return e;
      this.i++;
    }
  }

  private parsePrimary(): Expr {
    // Groups recurse through parseAlternation: bound the depth so deep nesting is an error
    // naming the place, not a stack overflow.
    if (++this.nesting > LIMITS.nesting) this.fail(`groups nested deeper than ${LIMITS.nesting} levels`);
    try {
      return this.parsePrimaryAt();
    } finally {
      this.nesting--;
    }
  }

  private parsePrimaryAt(): Expr {
    const start = this.i;
    const c = this.src[this.i];
    if (c === '"' || c === "'") return lit(this.parseString());
    if (c === '#' && this.dialect === 'kbnf') {
      const form = /^#(e|ex|substrs)?["']/.exec(this.src.slice(this.i, this.i + 10));
      if (!form) this.fail('expected #"regex", #e"regex", #ex"regex" or #substrs"text"');
      this.i += form[0].length - 1;
      // kbnf reads the escapes first, as in any string, then the regex.
      const text = this.parseString();
      const kind = form[1] ?? '';
      const place = `#${kind}${text.length > 40 ? JSON.stringify(text.slice(0, 40)) + '...' : JSON.stringify(text)} at ${this.place(start)}`;
      if (kind === 'substrs') return this.derived(substrings(text, `substrs@${start}`, place, this.budget));
      const regex = regexFullMatch(text, 'r', place);
      if (kind === 'e') return this.derived(earlyEndRegex(regex, `early-end-regex@${start}`, place, this.budget));
      if (kind === 'ex') return this.derived(regexComplement(regex, `regex-complement@${start}`, place, this.budget));
      return regex;
    }
    if (c === '(') {
      this.i++;
      const e = this.parseAlternation();
      this.skipSpace();
      if (this.src[this.i] !== ')') this.fail("missing ')' for the group opened here", start);
      this.i++;
      return e;
    }
    if (c === '[' && this.dialect === 'kbnf') {
      this.i++;
      const e = this.parseAlternation();
      this.skipSpace();
      if (this.src[this.i] !== ']') this.fail("missing ']' for the optional group opened here", start);
      this.i++;
      return rep(e, 0, 1);
    }
    if (c === '{' && this.dialect === 'kbnf') {
      this.i++;
      const e = this.parseAlternation();
      this.skipSpace();
      if (this.src[this.i] !== '}') this.fail("missing '}' for the repetition opened here", start);
      this.i++;
      return rep(e, 0, Infinity);
    }
    if (c === '[') return chars(this.parseCharClass());
    if (c === '.' && this.dialect === 'gbnf') {
      this.i++;
      return chars(ANY_CHAR);
    }
    const name = this.identAt(this.i);
    if (name) {
      this.i += name.length;
      return ref(name, this.place(start));
    }
    this.fail(`unexpected ${JSON.stringify(c)}`);
  }

  /** Rules of a derived terminal join the grammar (their names, with "@", cannot clash with a rule's). */
  private derived(d: DerivedTerminal): Expr {
    for (const r of d.rules) this.rules.set(r.name, r);
    return d.expr;
  }

  /** Both kbnf and llama.cpp let a quoted string span lines. */
  private findClosingQuote(from: number, q: string): number {
    for (let k = from; k < this.src.length; k++) {
      if (this.src[k] === '\\') k++;
      else if (this.src[k] === q) return k;
    }
    this.fail('unterminated string', from - 1);
  }

  /** A quoted string with escapes, as text. */
  private parseString(): string {
    const q = this.src[this.i];
    const end = this.findClosingQuote(this.i + 1, q);
    let out = '';
    this.i++;
    while (this.i < end) {
      if (this.src[this.i] === '\\') out += String.fromCodePoint(this.parseEscape());
      else {
        const cp = this.src.codePointAt(this.i)!;
        out += String.fromCodePoint(cp);
        this.i += cp > 0xffff ? 2 : 1;
      }
    }
    this.i = end + 1;
    return out;
  }

  /** After a backslash at this.i: returns the code point and moves past the escape. */
  private parseEscape(): number {
    return this.dialect === 'kbnf' ? this.kbnfEscape() : this.gbnfEscape();
  }

  /** llama.cpp's escapes; any other is an error there too. */
  private gbnfEscape(): number {
    const at = this.i;
    const c = this.src[this.i + 1];
    this.i += 2;
    const simple: Record<string, number> = { n: 10, r: 13, t: 9, '\\': 0x5c, '"': 0x22, '[': 0x5b, ']': 0x5d };
    if (c !== undefined && Object.hasOwn(simple, c)) return simple[c];
    const hexLen = c === 'x' ? 2 : c === 'u' ? 4 : c === 'U' ? 8 : 0;
    if (!hexLen) this.fail(c === undefined ? 'escape at the end of the text' : `unknown escape \\${c} (llama.cpp reads \\x \\u \\U \\t \\r \\n \\\\ \\" \\[ \\])`, at);
    return this.hexEscape(c, hexLen, at);
  }

  /**
   * kbnf's escapes (its unescaper): \b \f \n \r \t \v, \' \" \\ \/, \uHHHH (a surrogate pair
   * as two), \u{H..}, \xHH, octal \N..\NNN; any other is an error there, so here too: a regex
   * class like \d is written \\d in kbnf.
   */
  private kbnfEscape(): number {
    const at = this.i;
    const c = this.src[this.i + 1];
    this.i += 2;
    const simple: Record<string, number> = { b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, "'": 0x27, '"': 0x22, '\\': 0x5c, '/': 0x2f };
    if (c !== undefined && Object.hasOwn(simple, c)) return simple[c];
    if (c === 'x') return this.hexEscape(c, 2, at);
    if (c === 'u' && this.src[this.i] === '{') {
      const m = /^\{([0-9a-fA-F]{1,6})\}/.exec(this.src.slice(this.i, this.i + 9));
      if (!m) this.fail('bad \\u{...} escape', at);
      this.i += m[0].length;
      return this.scalar(parseInt(m[1], 16), `\\u{${m[1]}}`, at);
    }
    if (c === 'u') {
      const hi = this.hexDigits(4, at, c);
      if (hi >= 0xd800 && hi <= 0xdbff && /^\\u[dD][c-fC-F][0-9a-fA-F]{2}/.test(this.src.slice(this.i, this.i + 6))) {
        this.i += 2;
        const lo = this.hexDigits(4, at, c);
        return 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
      }
      return this.scalar(hi, `\\u${hi.toString(16)}`, at);
    }
    if (c !== undefined && c >= '0' && c <= '7') {
      const m = /^[0-7]{1,3}/.exec(this.src.slice(this.i - 1, this.i + 2))!;
      this.i += m[0].length - 1;
      const v = parseInt(m[0], 8);
      if (v > 0xff) this.fail(`octal escape \\${m[0]} is above \\377`, at);
      return v;
    }
    this.fail(c === undefined ? 'escape at the end of the text' : `unknown escape \\${c} (kbnf reads \\b \\f \\n \\r \\t \\v \\' \\" \\\\ \\/ \\u \\x and octal; a regex's \\${c} is written \\\\${c})`, at);
  }

  private hexEscape(c: string, len: number, at: number): number {
    const cp = this.hexDigits(len, at, c);
    return this.scalar(cp, `\\${c}${cp.toString(16)}`, at);
  }

  private hexDigits(len: number, at: number, c: string): number {
    const h = this.src.slice(this.i, this.i + len);
    if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(h)) this.fail(`bad \\${c} escape`, at);
    this.i += len;
    return parseInt(h, 16);
  }

  private scalar(cp: number, written: string, at: number): number {
    if (cp > MAX_CODE_POINT || (cp >= 0xd800 && cp <= 0xdfff)) this.fail(`escape ${written} is not a Unicode scalar value`, at);
    return cp;
  }

  private parseCharClass(): CodePointSet {
    const start = this.i;
    this.i++;
    const negated = this.src[this.i] === '^';
    if (negated) this.i++;
    const parts: CodePointSet[] = [];
    for (;;) {
      if (this.i >= this.src.length) this.fail("missing ']' for the character class opened here", start);
      if (this.src[this.i] === ']') {
        this.i++;
        break;
      }
      const lo = this.classChar();
      if (this.src[this.i] === '-' && this.src[this.i + 1] !== ']') {
        this.i++;
        const hi = this.classChar();
        if (hi < lo) this.fail('character range out of order', start);
        parts.push([lo, hi]);
      } else parts.push(singleton(lo));
    }
    const set = normalizeSet(parts.flat());
    return negated ? complementSet(set) : set;
  }

  private classChar(): number {
    if (this.src[this.i] === '\\') return this.parseEscape();
    const cp = this.src.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return cp;
  }
}
