// Lowers the expression grammar (grammar-ir.ts) to the flat byte-level form (flat-grammar.ts):
// literals become byte runs, code-point classes become UTF-8 byte sequences, groups and
// repetitions become helper rules. Repetition is right-recursive so the recognizer's stacks
// stay flat across iterations.

import { LIMITS } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { BYTES, END, FlatGrammar, REF } from './flat-grammar';
import { Expr, GrammarIR } from './grammar-ir';
import { utf8Sequences } from './utf8-sequences';

/** An item of an alternative: byte-set id (>= 0) or rule id encoded as -(id + 1). */
type Item = number;

export function lowerGrammar(ir: GrammarIR): FlatGrammar {
  return new Lowering(ir).run();
}

class Lowering {
  private ruleIds = new Map<string, number>();
  private ruleNames: string[] = [];
  private rulePlaces: string[] = [];
  private ruleBodies: Item[][][] = [];
  private byteSetIds = new Map<string, number>();
  private byteSets: Uint8Array[] = [];
  private charClassRules = new Map<string, number>();
  private positions = 0;
  /** Expression nesting being lowered (the passes recurse; parsers bound it much lower). */
  private depth = 0;

  constructor(private ir: GrammarIR) {}

  run(): FlatGrammar {
    for (const rule of this.ir.rules.values()) this.newRule(rule.name, rule.place);
    for (const rule of this.ir.rules.values()) {
      const id = this.ruleIds.get(rule.name)!;
      this.ruleBodies[id] = this.lowerAlts(rule.body, rule.name, rule.place);
      this.count(this.ruleBodies[id], rule.place);
    }
    const root = this.ruleIds.get(this.ir.root);
    if (root === undefined) throw new ConstraintError(`the root rule '${this.ir.root}' is not defined`);
    return this.flatten(root);
  }

  private newRule(name: string, place: string): number {
    const id = this.ruleNames.length;
    this.ruleIds.set(name, id);
    this.ruleNames.push(name);
    this.rulePlaces.push(place);
    this.ruleBodies.push([]);
    return id;
  }

  /** Helper rules by their body: equal groups, character sets and repetitions are one rule (see helper). */
  private helpersByBody = new Map<string, number>();

  /**
   * A rule for a group. Rules with the same body are one rule: every string of a schema then
   * has the same character and loop rules, so the automaton's states inside any of them have
   * the same top frames and share their token masks (token-masks.ts), and a maxLength's chain
   * of optional copies is shared by every bound that reaches as far.
   */
  private helper(owner: string, place: string, body: Item[][]): number {
    const key = body.map((a) => a.join(',')).join('|');
    const known = this.helpersByBody.get(key);
    if (known !== undefined) return known;
    const id = this.newHelper(owner, place, body);
    this.helpersByBody.set(key, id);
    return id;
  }

  private newHelper(owner: string, place: string, body: Item[][]): number {
    const id = this.ruleNames.length;
    this.ruleNames.push(`${owner}#${id}`);
    this.rulePlaces.push(place);
    this.ruleBodies.push(body);
    this.count(body, place);
    return id;
  }

  private count(body: Item[][], place: string): void {
    for (const a of body) this.positions += a.length + 1;
    this.checkSize(0, place);
  }

  /** Throws when `more` positions on top of those counted would pass the limit. */
  private checkSize(more: number, place: string, what = 'the grammar'): void {
    if (this.positions + more > LIMITS.positions)
      throw new ConstraintError(
        `${what} is too large: over ${LIMITS.positions} byte-level positions after expanding repetitions`,
        place,
      );
  }

  private enter(place: string): void {
    if (++this.depth > LIMITS.exprDepth) throw new ConstraintError(`expression nested deeper than ${LIMITS.exprDepth} levels`, place);
  }

  /** Byte-set id of each single byte, the common case (literals). */
  private singleByteSets = new Int32Array(256).fill(-1);

  private singleByte(b: number): number {
    let id = this.singleByteSets[b];
    if (id < 0) id = this.singleByteSets[b] = this.byteSet([[b, b]]);
    return id;
  }

  private byteSet(ranges: [number, number][]): number {
    const key = ranges.map((r) => `${r[0]}-${r[1]}`).join(',');
    let id = this.byteSetIds.get(key);
    if (id === undefined) {
      const set = new Uint8Array(256);
      for (const [lo, hi] of ranges) for (let b = lo; b <= hi; b++) set[b] = 1;
      id = this.byteSets.length;
      this.byteSets.push(set);
      this.byteSetIds.set(key, id);
    }
    return id;
  }

  private lowerAlts(e: Expr, owner: string, place: string): Item[][] {
    this.enter(place);
    try {
      if (e.t === 'alt') return e.items.flatMap((x) => (x.t === 'alt' ? this.lowerAlts(x, owner, place) : [this.lowerSeq(x, owner, place)]));
      return [this.lowerSeq(e, owner, place)];
    } finally {
      this.depth--;
    }
  }

  private lowerSeq(e: Expr, owner: string, place: string): Item[] {
    this.enter(place);
    try {
      return this.lowerSeqAt(e, owner, place);
    } finally {
      this.depth--;
    }
  }

  private lowerSeqAt(e: Expr, owner: string, place: string): Item[] {
    switch (e.t) {
      case 'seq':
        return e.items.flatMap((x) => this.lowerSeq(x, owner, place));
      case 'lit':
        return Array.from(e.bytes, (b) => this.singleByte(b));
      case 'bytes':
        return [this.byteSet(e.ranges)];
      case 'chars':
        return this.lowerChars(e.set, owner, place);
      case 'ref': {
        const id = this.ruleIds.get(e.name);
        if (id === undefined) throw new ConstraintError(`rule '${e.name}' is used but not defined`, e.place ?? place);
        return [-(id + 1)];
      }
      case 'alt':
        return [-(this.helper(owner, place, this.lowerAlts(e, owner, place)) + 1)];
      case 'rep':
        return this.lowerRep(e.item, e.min, e.max, owner, place);
    }
  }

  private lowerChars(set: number[], owner: string, place: string): Item[] {
    if (set.length === 0) return [this.byteSet([])];
    if (set[set.length - 1] < 0x80) {
      const ranges: [number, number][] = [];
      for (let i = 0; i < set.length; i += 2) ranges.push([set[i], set[i + 1]]);
      return [this.byteSet(ranges)];
    }
    const key = set.join(',');
    let id = this.charClassRules.get(key);
    if (id === undefined) {
      // Group the UTF-8 sequences by length; single-byte ones merge into one byte set.
      const ascii: [number, number][] = [];
      const alts: Item[][] = [];
      for (let i = 0; i < set.length; i += 2) {
        for (const s of utf8Sequences(set[i], set[i + 1])) {
          if (s.length === 1) ascii.push(s[0]);
          else alts.push(s.map((r) => this.byteSet([r])));
        }
      }
      if (ascii.length) alts.unshift([this.byteSet(ascii)]);
      id = this.helper(owner, place, alts);
      this.charClassRules.set(key, id);
    }
    return [-(id + 1)];
  }

  private lowerRep(item: Expr, min: number, max: number, owner: string, place: string): Item[] {
    if (!(min >= 0) || !(max >= min)) throw new ConstraintError(`bad repetition bounds {${min},${max}}`, place);
    const x = this.lowerSeq(item, owner, place);
    // Checked before expanding: the copies are what would exhaust memory.
    const copies = min + (max === Infinity ? 1 : max - min);
    const bounds = `{${min},${max === Infinity ? '' : max}}`;
    this.checkSize(copies * (x.length + 2), place, `repetition ${bounds} of ${x.length} positions`);
    const out: Item[] = [];
    for (let i = 0; i < min; i++) for (const it of x) out.push(it);
    if (max === Infinity) {
      // One loop rule per repeated item (its body names itself, so it is found by the item).
      const key = `loop:${x.join(',')}`;
      let id = this.helpersByBody.get(key);
      if (id === undefined) {
        id = this.newHelper(owner, place, []);
        this.ruleBodies[id] = [[...x, -(id + 1)], []];
        this.count(this.ruleBodies[id], place);
        this.helpersByBody.set(key, id);
      }
      out.push(-(id + 1));
    } else if (max > min) {
      // O_1 ::= X | ε ; O_k ::= X O_{k-1} | ε
      let prev = -1;
      for (let k = 1; k <= max - min; k++) {
        const body: Item[][] = [prev < 0 ? [...x] : [...x, -(prev + 1)], []];
        prev = this.helper(owner, place, body);
      }
      out.push(-(prev + 1));
    }
    return out;
  }

  private flatten(root: number): FlatGrammar {
    const n = this.positions;
    const kind = new Uint8Array(n);
    const arg = new Int32Array(n);
    const ruleAlts: number[][] = [];
    let p = 0;
    for (const body of this.ruleBodies) {
      const starts: number[] = [];
      for (const a of body) {
        starts.push(p);
        for (const item of a) {
          if (item >= 0) {
            kind[p] = BYTES;
            arg[p] = item;
          } else {
            kind[p] = REF;
            arg[p] = -item - 1;
          }
          p++;
        }
        kind[p] = END;
        p++;
      }
      ruleAlts.push(starts);
    }
    const byteSets = new Uint8Array(this.byteSets.length * 256);
    this.byteSets.forEach((s, i) => byteSets.set(s, i * 256));
    return { kind: kind.subarray(0, p), arg: arg.subarray(0, p), byteSets, ruleAlts, ruleNames: this.ruleNames, rulePlaces: this.rulePlaces, root };
  }
}
