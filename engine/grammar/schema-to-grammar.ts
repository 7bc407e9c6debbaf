// JSON Schema (draft 2020-12) to grammar. The grammar accepts exactly the canonical JSON text
// (json-text.ts) of the values the schema accepts, with object keys in one fixed order (the
// order they first appear in the schema, then any others) and optional whitespace between
// tokens. A keyword the grammar cannot enforce exactly is refused with its JSON pointer rather
// than ignored, so an accepted schema never yields output that then fails validation.

import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { LIMITS, overLimit } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { complementSet, CodePointSet } from './code-point-set';
import { alt, altOf, EMPTY, Expr, GrammarIR, GrammarRule, lit, NOTHING, ref, rep, seq } from './grammar-ir';
import { decimalRange } from './decimal-range';
import { formatExpr } from './json-formats';
import {
  ALL_CHARS,
  canonicalJson,
  integerRange,
  INTEGER,
  jsonChar,
  jsonEncodeChars,
  NUMBER,
} from './json-text';
import { regexBranches } from './regex-to-expr';
import { mergeSchemas, Schema, SchemaObject, typeList } from './schema-merge';

export interface SchemaGrammar {
  ir: GrammarIR;
  /** Object key order the grammar writes: rank per key (keys not listed come last). */
  keyRank: Map<string, number>;
}

/**
 * Output is compact JSON: no whitespace between tokens. That is the canonical text the grammar
 * is exact for, it keeps models from padding, and it turns keys and punctuation into forced
 * paths that skip sampling.
 */
const WS: Expr = EMPTY;

const ANNOTATIONS = new Set([
  'title', 'description', 'default', 'examples', '$comment', 'deprecated', 'readOnly', 'writeOnly', '$schema',
  'contentMediaType', 'contentEncoding', 'contentSchema', '$defs', 'definitions',
]);
const HANDLED = new Set([
  'type', 'nullable', 'properties', 'required', 'additionalProperties', 'enum', 'const', 'anyOf', 'oneOf', 'allOf',
  '$ref', 'items', 'prefixItems', 'minItems', 'maxItems', 'minLength', 'maxLength', 'pattern', 'format', 'minimum',
  'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'uniqueItems', '$id',
]);
const WHY_REFUSED: Record<string, string> = {
  not: 'negation cannot be expressed as a grammar',
  if: 'conditional schemas are not supported',
  then: 'conditional schemas are not supported',
  else: 'conditional schemas are not supported',
  multipleOf: 'multipleOf is not supported',
  uniqueItems: 'uniqueItems: true cannot be enforced by a grammar',
  contains: 'contains is not supported',
  minContains: 'minContains is not supported',
  maxContains: 'maxContains is not supported',
  patternProperties: 'patternProperties is not supported',
  propertyNames: 'propertyNames is not supported',
  dependentRequired: 'dependentRequired is not supported',
  dependentSchemas: 'dependentSchemas is not supported',
  unevaluatedProperties: 'unevaluatedProperties is not supported',
  unevaluatedItems: 'unevaluatedItems is not supported',
  minProperties: 'minProperties is not supported',
  maxProperties: 'maxProperties is not supported',
  $dynamicRef: '$dynamicRef is not supported',
  $dynamicAnchor: '$dynamicAnchor is not supported',
  $anchor: '$anchor is not supported (use $defs with a JSON-pointer $ref)',
  $vocabulary: 'custom vocabularies are not supported',
};

const ALL_TYPES = ['null', 'boolean', 'object', 'array', 'number', 'string'];

/** Checks enum values against the rest of a schema node (only nodes without $ref). */
let enumChecker: Ajv2020 | undefined;
function enumValidator(): Ajv2020 {
  if (!enumChecker) {
    enumChecker = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
    addFormats(enumChecker);
  }
  return enumChecker;
}

export function schemaToGrammar(schema: Schema): SchemaGrammar {
  return new SchemaConverter(schema).run();
}

class SchemaConverter {
  private rules = new Map<string, GrammarRule>();
  private refRules = new Map<string, string>();
  keyRank = new Map<string, number>();
  private inlining: string[] = [];

  constructor(private root: Schema) {
    this.rankKeys(root);
  }

  run(): SchemaGrammar {
    const body = this.convert(this.root, '#');
    if (!body) throw new ConstraintError('the schema accepts no value at all', '#');
    this.rule('root', body, '#');
    return { ir: { rules: this.rules, root: 'root' }, keyRank: this.keyRank };
  }

  private canon = (v: unknown): string => canonicalJson(v, this.keyRank);

  private rule(name: string, body: Expr, place: string): Expr {
    this.rules.set(name, { name, body, place });
    return ref(name);
  }

  /** Shared rule, made on first use. */
  private shared(name: string, make: () => Expr): Expr {
    if (!this.rules.has(name)) {
      this.rules.set(name, { name, body: EMPTY, place: name });
      this.rules.get(name)!.body = make();
    }
    return ref(name);
  }

  // ---- key order -------------------------------------------------------------------------

  private rankKeys(s: unknown): void {
    const add = (k: string) => {
      if (!this.keyRank.has(k)) this.keyRank.set(k, this.keyRank.size);
    };
    const addValueKeys = (v: unknown) => {
      if (v && typeof v === 'object') {
        if (!Array.isArray(v)) for (const k of Object.keys(v)) add(k);
        for (const x of Object.values(v as object)) addValueKeys(x);
      }
    };
    const walk = (n: unknown) => {
      if (!n || typeof n !== 'object') return;
      if (Array.isArray(n)) return n.forEach(walk);
      const o = n as SchemaObject;
      if (o.properties && typeof o.properties === 'object') for (const k of Object.keys(o.properties)) add(k);
      if (Array.isArray(o.required)) for (const k of o.required) if (typeof k === 'string') add(k);
      if ('const' in o) addValueKeys(o.const);
      if (Array.isArray(o.enum)) o.enum.forEach(addValueKeys);
      for (const [k, v] of Object.entries(o)) if (k !== 'const' && k !== 'enum' && k !== 'default' && k !== 'examples') {
        if (k === 'properties' || k === '$defs' || k === 'definitions') Object.values(v as object).forEach(walk);
        else walk(v);
      }
    };
    walk(s);
  }

  // ---- references ------------------------------------------------------------------------

  private resolvePointer(refText: string, place: string): { node: Schema; ptr: string } {
    if (!refText.startsWith('#'))
      throw new ConstraintError(`$ref ${JSON.stringify(refText)} is not a local reference (only '#...' pointers are supported)`, place);
    let node: unknown = this.root;
    const path = refText.slice(1);
    if (path !== '' && !path.startsWith('/'))
      throw new ConstraintError(`$ref ${JSON.stringify(refText)}: anchors are not supported, use a JSON pointer`, place);
    for (const raw of path === '' ? [] : path.slice(1).split('/')) {
      const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      if (!node || typeof node !== 'object' || !Object.hasOwn(node as object, key))
        throw new ConstraintError(`$ref ${JSON.stringify(refText)} points to nothing`, place);
      node = (node as Record<string, unknown>)[key];
    }
    if (typeof node !== 'boolean' && (!node || typeof node !== 'object' || Array.isArray(node)))
      throw new ConstraintError(`$ref ${JSON.stringify(refText)} does not point to a schema`, place);
    return { node: node as Schema, ptr: refText };
  }

  /** A rule per referenced pointer, so recursive schemas become recursive rules. */
  private refExpr(refText: string, place: string): Expr | null {
    const { node, ptr } = this.resolvePointer(refText, place);
    const name = 'ref:' + ptr;
    if (!this.refRules.has(ptr)) {
      this.refRules.set(ptr, name);
      this.rules.set(name, { name, body: NOTHING, place: ptr });
      const body = this.convert(node, ptr);
      this.rules.get(name)!.body = body ?? NOTHING;
      // A target that accepts nothing makes the reference accept nothing (recursive uses made
      // while converting it keep the empty rule, which the grammar checks then drop).
      if (body === null) return null;
    }
    return ref(name, place);
  }

  /** Inlines $ref and allOf into one schema object (used where constraints must combine). */
  private flatten(s: Schema, place: string): Schema {
    if (typeof s === 'boolean') return s;
    let out: SchemaObject = { ...s };
    const parts: Schema[] = [];
    if (out.$ref !== undefined) {
      const target = out.$ref as string;
      delete out.$ref;
      if (this.inlining.includes(target))
        throw new ConstraintError(`recursive $ref ${JSON.stringify(target)} combined with other keywords or allOf is not supported`, place);
      this.inlining.push(target);
      try {
        parts.push(this.flatten(this.resolvePointer(target, place).node, target));
      } finally {
        this.inlining.pop();
      }
    }
    if (out.allOf !== undefined) {
      (out.allOf as Schema[]).forEach((p, i) => parts.push(this.flatten(p, `${place}/allOf/${i}`)));
      delete out.allOf;
    }
    for (const p of parts) {
      if (p === false) return false;
      if (p === true) continue;
      out = mergeSchemas(out, p, place, this.canon);
    }
    return out;
  }

  private hasConstraints(s: SchemaObject): boolean {
    return Object.keys(s).some((k) => !ANNOTATIONS.has(k) && k !== '$id');
  }

  // ---- values ----------------------------------------------------------------------------

  /** The grammar of the values `s` accepts; null when it accepts none. */
  convert(s: Schema, place: string): Expr | null {
    if (s === true) return this.anyValue();
    if (s === false) return null;
    if (!s || typeof s !== 'object' || Array.isArray(s)) throw new ConstraintError('a schema must be an object or a boolean', place);
    if (s.$id !== undefined && place !== '#') throw new ConstraintError('$id inside a schema is not supported', place);
    if (s.$ref !== undefined) {
      const rest = { ...s };
      delete rest.$ref;
      if (!this.hasConstraints(rest)) return this.refExpr(s.$ref as string, `${place}/$ref`);
    }
    const node = s.$ref !== undefined || s.allOf !== undefined ? this.flatten(s, place) : s;
    if (typeof node === 'boolean') return this.convert(node, place);
    this.checkKeywords(node, place);

    const branchKey = node.anyOf !== undefined ? 'anyOf' : node.oneOf !== undefined ? 'oneOf' : undefined;
    if (branchKey) {
      const base = { ...node };
      delete base.anyOf;
      delete base.oneOf;
      const branches = (node[branchKey] as Schema[]).map((b, i) => {
        const p = `${place}/${branchKey}/${i}`;
        const fb = this.flatten(b, p);
        return { place: p, schema: fb === true ? base : fb === false ? false : mergeSchemas(base, fb, p, this.canon) };
      });
      if (branchKey === 'oneOf') this.checkDisjoint(branches.map((b) => b.schema), place);
      const alts = branches.map((b) => this.convert(b.schema, b.place)).filter((e): e is Expr => e !== null);
      return alts.length ? altOf(alts) : null;
    }

    if (node.const !== undefined || node.enum !== undefined) return this.enumExpr(node, place);

    let types = typeList(node) ?? ALL_TYPES;
    if (types.includes('number')) types = types.filter((t) => t !== 'integer');
    const alts: Expr[] = [];
    for (const t of types) {
      const e = this.typeExpr(t, node, place);
      if (e) alts.push(e);
    }
    return alts.length ? altOf(alts) : null;
  }

  private checkKeywords(s: SchemaObject, place: string): void {
    for (const k of Object.keys(s)) {
      if (ANNOTATIONS.has(k)) continue;
      if (k === 'uniqueItems' && s.uniqueItems === false) continue;
      if (k === 'multipleOf' && s.multipleOf === 1 && typeList(s)?.every((t) => t === 'integer')) continue;
      if (HANDLED.has(k) && k !== 'uniqueItems') continue;
      throw new ConstraintError(`keyword '${k}': ${WHY_REFUSED[k] ?? 'not supported'}`, `${place}/${k}`);
    }
    if (s.items !== undefined && Array.isArray(s.items))
      throw new ConstraintError("array form of 'items' is from older drafts; use prefixItems", `${place}/items`);
  }

  /** oneOf is enforced as anyOf, which is exact only when no value can match two branches. */
  private checkDisjoint(branches: Schema[], place: string): void {
    const sig = branches.map((b) => this.signature(b));
    for (let i = 0; i < sig.length; i++)
      for (let j = i + 1; j < sig.length; j++) {
        if (!this.disjoint(sig[i], sig[j], branches[i], branches[j]))
          throw new ConstraintError(
            `oneOf branches ${i} and ${j} may both match one value, which a grammar cannot rule out; use anyOf or make the branches distinct (different types, const/enum values, or a required property with different const values)`,
            `${place}/oneOf`,
          );
      }
  }

  private signature(b: Schema): { types: Set<string>; values?: Set<string> } {
    if (b === false) return { types: new Set() };
    if (b === true) return { types: new Set(ALL_TYPES) };
    const vals = b.const !== undefined ? [b.const] : (b.enum as unknown[] | undefined);
    if (vals) return { types: new Set(vals.map((v) => jsonType(v).replace('integer', 'number'))), values: new Set(vals.map(this.canon)) };
    const t = typeList(b) ?? ALL_TYPES;
    return { types: new Set(t.map((x) => (x === 'integer' ? 'number' : x))) };
  }

  private disjoint(a: { types: Set<string>; values?: Set<string> }, b: { types: Set<string>; values?: Set<string> }, sa: Schema, sb: Schema): boolean {
    const common = [...a.types].filter((t) => b.types.has(t));
    if (common.length === 0) return true;
    if (a.values && b.values) return [...a.values].every((v) => !b.values!.has(v));
    // Objects told apart by a required property with distinct constant values.
    if (common.length === 1 && common[0] === 'object' && typeof sa === 'object' && typeof sb === 'object') {
      const ra = (sa.required ?? []) as string[];
      const rb = (sb.required ?? []) as string[];
      const pa = (sa.properties ?? {}) as Record<string, Schema>;
      const pb = (sb.properties ?? {}) as Record<string, Schema>;
      for (const k of ra) {
        if (!rb.includes(k) || !Object.hasOwn(pa, k) || !Object.hasOwn(pb, k) || typeof pa[k] !== 'object' || typeof pb[k] !== 'object') continue;
        const va = this.signature(pa[k]).values, vb = this.signature(pb[k]).values;
        if (va && vb && [...va].every((v) => !vb.has(v))) return true;
      }
    }
    return false;
  }

  private enumExpr(node: SchemaObject, place: string): Expr | null {
    let values = node.const !== undefined ? [node.const] : (node.enum as unknown[]);
    if (Array.isArray(values) && values.length > LIMITS.properties)
      throw overLimit("the number of 'enum' values", values.length, LIMITS.properties, `${place}/enum`);
    const rest: SchemaObject = { ...node };
    delete rest.const;
    delete rest.enum;
    if (this.hasConstraints(rest)) {
      const text = JSON.stringify(rest);
      if (text.includes('"$ref"')) {
        const types = typeList(rest);
        if (types) values = values.filter((v) => types.includes(jsonType(v)) || (types.includes('integer') && Number.isInteger(v)));
      } else {
        const check = enumValidator().compile(rest);
        values = values.filter((v) => check(v));
        enumValidator().removeSchema(rest);
      }
    }
    const seen = new Set<string>();
    const alts: Expr[] = [];
    for (const v of values) {
      const text = this.canon(v);
      if (seen.has(text)) continue;
      seen.add(text);
      alts.push(lit(text));
    }
    return alts.length ? altOf(alts) : null;
  }

  private typeExpr(t: string, s: SchemaObject, place: string): Expr | null {
    switch (t) {
      case 'null':
        return lit('null');
      case 'boolean':
        return alt(lit('true'), lit('false'));
      case 'integer':
      case 'number':
        return this.numberExpr(t === 'integer', s, place);
      case 'string':
        return this.stringExpr(s, place);
      case 'array':
        return this.arrayExpr(s, place);
      case 'object':
        return this.objectExpr(s, place);
      default:
        throw new ConstraintError(`unknown type '${t}'`, `${place}/type`);
    }
  }

  private numberExpr(integer: boolean, s: SchemaObject, place: string): Expr | null {
    const num = (k: string) => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
    let lo = -Infinity, loExcl = false, hi = Infinity, hiExcl = false;
    if (num('minimum') !== undefined) lo = num('minimum')!;
    if (num('exclusiveMinimum') !== undefined && num('exclusiveMinimum')! >= lo) [lo, loExcl] = [num('exclusiveMinimum')!, true];
    if (num('maximum') !== undefined) hi = num('maximum')!;
    if (num('exclusiveMaximum') !== undefined && num('exclusiveMaximum')! <= hi) [hi, hiExcl] = [num('exclusiveMaximum')!, true];
    for (const v of [lo, hi])
      if (Number.isFinite(v) && Math.abs(v) > Number.MAX_SAFE_INTEGER)
        throw new ConstraintError('numeric bounds beyond 2^53 are not supported', place);
    const bounded = lo !== -Infinity || hi !== Infinity;
    if (integer) {
      if (!bounded) return INTEGER;
      const a = lo === -Infinity ? lo : loExcl ? Math.floor(lo) + 1 : Math.ceil(lo);
      const b = hi === Infinity ? hi : hiExcl ? Math.ceil(hi) - 1 : Math.floor(hi);
      return a <= b ? integerRange(a, b) : null;
    }
    if (!bounded) return NUMBER;
    if (lo > hi || (lo === hi && (loExcl || hiExcl))) return null;
    return decimalRange(lo, loExcl, hi, hiExcl, place);
  }

  private jsonChars(): Expr {
    return this.shared('json-char', () => jsonChar(ALL_CHARS));
  }

  private stringExpr(s: SchemaObject, place: string): Expr | null {
    const minLength = (s.minLength as number | undefined) ?? 0;
    const maxLength = (s.maxLength as number | undefined) ?? Infinity;
    if (minLength > maxLength) return null;
    const hasLength = s.minLength !== undefined || s.maxLength !== undefined;
    if (s.format !== undefined || s.pattern !== undefined) {
      if (hasLength) throw new ConstraintError('minLength/maxLength together with pattern or format is not supported', place);
      if (s.format !== undefined && s.pattern !== undefined)
        throw new ConstraintError('pattern together with format is not supported', place);
    }
    if (s.format !== undefined) return seq(lit('"'), jsonEncodeChars(formatExpr(s.format as string, `${place}/format`)), lit('"'));
    if (s.pattern !== undefined) {
      const any = rep(this.jsonChars(), 0, Infinity);
      const branches = regexBranches(s.pattern as string, 'u', `${place}/pattern`).map((b) =>
        seq(b.anchoredStart ? EMPTY : any, jsonEncodeChars(b.expr), b.anchoredEnd ? EMPTY : any),
      );
      return seq(lit('"'), altOf(branches), lit('"'));
    }
    if (!hasLength) return this.shared('string', () => seq(lit('"'), rep(this.jsonChars(), 0, Infinity), lit('"')));
    if (minLength > LIMITS.repeat) throw overLimit("'minLength'", minLength, LIMITS.repeat, `${place}/minLength`);
    if (maxLength !== Infinity && maxLength > LIMITS.repeat) throw overLimit("'maxLength'", maxLength, LIMITS.repeat, `${place}/maxLength`);
    return seq(lit('"'), rep(this.jsonChars(), minLength, maxLength), lit('"'));
  }

  /** Any JSON value. */
  private anyValue(): Expr {
    return this.shared('value', () => {
      const ws = WS;
      const v = ref('value');
      const str = this.shared('string', () => seq(lit('"'), rep(this.jsonChars(), 0, Infinity), lit('"')));
      const member = seq(str, ws, lit(':'), ws, v);
      const obj = seq(lit('{'), ws, alt(EMPTY, seq(member, rep(seq(ws, lit(','), ws, member), 0, Infinity), ws)), lit('}'));
      const arr = seq(lit('['), ws, alt(EMPTY, seq(v, rep(seq(ws, lit(','), ws, v), 0, Infinity), ws)), lit(']'));
      return alt(obj, arr, str, NUMBER, lit('true'), lit('false'), lit('null'));
    });
  }

  private arrayExpr(s: SchemaObject, place: string): Expr | null {
    const prefix = (s.prefixItems ?? []) as Schema[];
    const itemsSchema = (s.items ?? true) as Schema;
    const minItems = (s.minItems as number | undefined) ?? 0;
    let maxItems = (s.maxItems as number | undefined) ?? Infinity;
    // Checked before any work: each counted element becomes grammar positions.
    if (minItems > LIMITS.arrayItems) throw overLimit("'minItems'", minItems, LIMITS.arrayItems, `${place}/minItems`);
    if (maxItems !== Infinity && maxItems > LIMITS.arrayItems) throw overLimit("'maxItems'", maxItems, LIMITS.arrayItems, `${place}/maxItems`);
    if (prefix.length > LIMITS.arrayItems) throw overLimit("the number of 'prefixItems'", prefix.length, LIMITS.arrayItems, `${place}/prefixItems`);
    const prefixExprs: (Expr | null)[] = prefix.map((p, i) => this.convert(p, `${place}/prefixItems/${i}`));
    const itemExpr = this.convert(itemsSchema, `${place}/items`);
    // The first position whose schema accepts nothing caps the length.
    const firstImpossible = prefixExprs.findIndex((e) => e === null);
    if (firstImpossible >= 0) maxItems = Math.min(maxItems, firstImpossible);
    else if (itemExpr === null) maxItems = Math.min(maxItems, prefix.length);
    if (minItems > maxItems) return null;
    const ws = WS;
    const sep = seq(ws, lit(','), ws);
    const at = (i: number) => (i < prefix.length ? prefixExprs[i]! : itemExpr!);
    // after(k): what may follow once k >= 1 elements are written. Past the prefix the elements
    // are alike, so one bounded repetition says it (no nesting per element); each prefix
    // position is its own rule, so expressions stay shallow however long the prefix is.
    const uniformFrom = Math.max(prefix.length, 1);
    let tail: Expr =
      maxItems <= uniformFrom ? EMPTY : rep(seq(sep, itemExpr!), Math.max(0, minItems - uniformFrom), maxItems - uniformFrom);
    const id = this.rules.size;
    for (let k = Math.min(uniformFrom, maxItems) - 1; k >= 1; k--) {
      const step = seq(sep, at(k), tail);
      tail = this.rule(`array${id}-after${k}`, k >= minItems ? alt(EMPTY, step) : step, place);
    }
    let body: Expr;
    if (maxItems === 0) body = EMPTY;
    else {
      const first = seq(at(0), tail);
      body = minItems === 0 ? alt(EMPTY, first) : first;
    }
    return seq(lit('['), ws, body, ws, lit(']'));
  }

  private objectExpr(s: SchemaObject, place: string): Expr | null {
    const props = (s.properties ?? {}) as Record<string, Schema>;
    const required = new Set((s.required ?? []) as string[]);
    const additional = (s.additionalProperties ?? true) as Schema;
    const declaredKeys = Object.keys(props);
    if (declaredKeys.length > LIMITS.properties)
      throw overLimit("the number of 'properties'", declaredKeys.length, LIMITS.properties, `${place}/properties`);
    if (required.size > LIMITS.properties) throw overLimit("the number of 'required' names", required.size, LIMITS.properties, `${place}/required`);
    for (const k of [...declaredKeys, ...required])
      if (typeof k === 'string' && k.length > LIMITS.keyChars)
        throw overLimit('the length of a property name', k.length, LIMITS.keyChars, `${place}/properties/${escapePointer(k.slice(0, 40))}...`);
    const keys = [...new Set([...declaredKeys, ...required])].sort(
      (a, b) => (this.keyRank.get(a) ?? Infinity) - (this.keyRank.get(b) ?? Infinity),
    );
    const ws = WS;
    const members: { key: string; expr: Expr; required: boolean }[] = [];
    for (const key of keys) {
      const declared = Object.hasOwn(props, key);
      const schema = declared ? props[key] : additional;
      const valuePlace = declared ? `${place}/properties/${escapePointer(key)}` : `${place}/additionalProperties`;
      const value = this.convert(schema, valuePlace);
      if (value === null) {
        if (required.has(key)) return null;
        continue;
      }
      members.push({ key, expr: seq(lit(JSON.stringify(key)), ws, lit(':'), ws, value), required: required.has(key) });
    }
    const extraValue = this.convert(additional, `${place}/additionalProperties`);
    const extra = extraValue === null ? null : seq(this.keyNotIn(keys), ws, lit(':'), ws, extraValue);
    const sep = seq(ws, lit(','), ws);
    // first(i): members from i on, none written yet; rest(i): the same after at least one.
    let rest: Expr = extra ? rep(seq(sep, extra), 0, Infinity) : EMPTY;
    let first: Expr = extra ? alt(EMPTY, seq(extra, rest)) : EMPTY;
    for (let i = members.length - 1; i >= 0; i--) {
      const m = members[i];
      const name = `obj${this.rules.size}`;
      const restNext = rest, firstNext = first;
      rest = this.rule(`${name}-rest`, m.required ? seq(sep, m.expr, restNext) : alt(seq(sep, m.expr, restNext), restNext), place);
      first = this.rule(`${name}-first`, m.required ? seq(m.expr, restNext) : alt(seq(m.expr, restNext), firstNext), place);
    }
    return seq(lit('{'), ws, first, ws, lit('}'));
  }

  /** A JSON string (with quotes) that is none of `names`, as a trie of the names. */
  private keyNotIn(names: string[]): Expr {
    if (names.length === 0) return this.shared('string', () => seq(lit('"'), rep(this.jsonChars(), 0, Infinity), lit('"')));
    interface Node { end: boolean; next: Map<number, Node> }
    const rootNode: Node = { end: false, next: new Map() };
    for (const n of names) {
      let node = rootNode;
      for (const ch of n) {
        const cp = ch.codePointAt(0)!;
        let nx = node.next.get(cp);
        if (!nx) node.next.set(cp, (nx = { end: false, next: new Map() }));
        node = nx;
      }
      node.end = true;
    }
    const anyTail = rep(this.jsonChars(), 0, Infinity);
    const build = (node: Node): Expr => {
      const alts: Expr[] = [];
      if (!node.end) alts.push(EMPTY);
      const used: number[] = [];
      for (const [cp, child] of node.next) {
        alts.push(seq(jsonChar([cp, cp]), build(child)));
        used.push(cp, cp);
      }
      const others: CodePointSet = complementSet(used.length ? normalize(used) : []);
      if (others.length) alts.push(seq(jsonChar(others), anyTail));
      return altOf(alts);
    };
    return seq(lit('"'), build(rootNode), lit('"'));
  }
}

function normalize(r: number[]): CodePointSet {
  const pairs: [number, number][] = [];
  for (let i = 0; i < r.length; i += 2) pairs.push([r[i], r[i + 1]]);
  pairs.sort((a, b) => a[0] - b[0]);
  return pairs.flat();
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}
