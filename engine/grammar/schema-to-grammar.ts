// JSON Schema (draft 2020-12) to grammar. The grammar accepts exactly the canonical JSON text
// (json-text.ts) of the values the schema accepts, with object keys in one fixed order (the
// order they first appear in the schema, then any others) and optional whitespace between
// tokens. A keyword the grammar cannot enforce exactly is refused with its JSON pointer rather
// than ignored, so an accepted schema never yields output that then fails validation.

import { LIMITS, overLimit } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { complementSet, CodePointSet, intersectSets, subtractSet } from './code-point-set';
import { alt, altOf, chars, EMPTY, Expr, GrammarIR, GrammarRule, lit, NOTHING, ref, rep, seq } from './grammar-ir';
import { decimalRange } from './decimal-range';
import { checksStrings, formatExpr } from './json-formats';
import {
  ALL_CHARS,
  canonicalJson,
  integerRange,
  INTEGER,
  jsonChar,
  jsonEncodeChars,
  NUMBER,
} from './json-text';
import { multiplesExpr } from './multiple-of';
import { deterministicRegex, repeatsAnySafeChar } from './regex-automata';
import { regexBranches } from './regex-to-expr';
import { mergeSchemas, Schema, SchemaObject, typeList } from './schema-merge';
import { ajvCopy, Draft, draftOf, normalizeDocument, VALIDATION_KEYWORDS } from './schema-drafts';
import { freshAjv } from './schema-validator';

/** Every character but printable ASCII (0x20-0x7e): what property names rarely contain. */
const NOT_PRINTABLE_ASCII: CodePointSet = complementSet([0x20, 0x7e]);

export interface SchemaGrammar {
  ir: GrammarIR;
  /** Object key order the grammar writes: rank per key (keys not listed come last). */
  keyRank: Map<string, number>;
}

/** How the output may be spaced between JSON tokens. */
export type JsonWhitespace = 'compact' | 'flexible';

/**
 * Compact output (the default) has no whitespace between tokens: that is the canonical text the
 * grammar is exact for, it keeps models from padding, and it turns keys and punctuation into
 * forced paths that skip sampling. Flexible output allows JSON whitespace between tokens (what
 * other harnesses feed and some users want), which the final check's JSON.parse ignores.
 */
function whitespace(mode: JsonWhitespace): Expr {
  return mode === 'flexible' ? rep(chars([0x09, 0x0a, 0x0d, 0x0d, 0x20, 0x20]), 0, Infinity) : EMPTY;
}

const ANNOTATIONS = new Set([
  'title', 'description', 'default', 'examples', '$comment', 'deprecated', 'readOnly', 'writeOnly', '$schema',
  'contentMediaType', 'contentEncoding', 'contentSchema', '$defs', 'definitions',
]);
const HANDLED = new Set([
  'type', 'nullable', 'properties', 'required', 'additionalProperties', 'enum', 'const', 'anyOf', 'oneOf', 'allOf',
  '$ref', 'items', 'prefixItems', 'minItems', 'maxItems', 'minLength', 'maxLength', 'pattern', 'format', 'minimum',
  'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'uniqueItems', '$id', 'dependentRequired', 'dependentSchemas', 'multipleOf',
  'patternProperties', 'propertyNames', 'minProperties', 'maxProperties',
  // Left only beside anyOf/oneOf (resolveUnevaluated), where each merged branch resolves them.
  'unevaluatedProperties', 'unevaluatedItems',
]);
const WHY_REFUSED: Record<string, string> = {
  not: 'negation cannot be expressed as a grammar',
  if: 'conditional schemas are not supported',
  then: 'conditional schemas are not supported',
  else: 'conditional schemas are not supported',
  uniqueItems: 'uniqueItems: true cannot be enforced by a grammar',
  contains: 'contains is not supported',
  minContains: 'minContains is not supported',
  maxContains: 'maxContains is not supported',
  $dynamicRef: '$dynamicRef is not supported',
  $dynamicAnchor: '$dynamicAnchor is not supported',
  $anchor: '$anchor is not supported (use $defs with a JSON-pointer $ref)',
  $vocabulary: 'custom vocabularies are not supported',
};

const ALL_TYPES = ['null', 'boolean', 'object', 'array', 'number', 'string'];

export function schemaToGrammar(schema: Schema, mode: JsonWhitespace = 'compact'): SchemaGrammar {
  return new SchemaConverter(schema, draftOf(schema), whitespace(mode)).run();
}

/** The key order grammar and canonicalJson share for a schema (without converting it). */
export function schemaKeyRank(schema: Schema): Map<string, number> {
  return new SchemaConverter(schema, draftOf(schema), EMPTY).keyRank;
}

/** The key under which enum checks see the whole document (SchemaConverter.valueChecker). */
const DOCUMENT_KEY = 'urn:rwkv-flow:schema';

/** Inlined references (a $ref with other keywords beside it) per conversion, beyond which it is refused. */
const MAX_INLINED_REFS = 20_000;

/**
 * When an unanchored pattern is written as its deterministic automaton (patternBody): at most
 * 1,000 states (each is a grammar rule), and at most 2 states, reached by safe characters, from
 * which some run of safe characters is refused (each is a walk of the whole vocabulary). `.+`,
 * `.*:.*` and "contains one of these names" have none; `^[0-9]{4}` has four, and stays an expression. A schema's patterns explore
 * at most 4,000 states together (~40 ms of compile time per 500 states): past that the rest stay
 * expressions, so many patterns cannot make a schema that compiled before time out.
 */
const PATTERN_AUTOMATON = { states: 1_000, walked: 2, statesPerSchema: 4_000 };

class SchemaConverter {
  private rules = new Map<string, GrammarRule>();
  private refRules = new Map<string, string>();
  keyRank = new Map<string, number>();
  private inlining: string[] = [];
  /** Targets inlined by the schema nodes being converted, outermost first (see flatten). */
  private activeInlines: string[] = [];
  private inlinedCount = 0;
  /** Anchors (`$anchor`, or an `$id` that is only a fragment) to their JSON pointers. */
  private anchors = new Map<string, string>();
  /** Schema objects whose subtree holds a $ref (a nested $id there would change what it means). */
  private holdsRef = new WeakSet<object>();
  private rootId: string | undefined;
  private enumAjv?: ReturnType<typeof freshAjv>;
  /** Each `pattern`'s string contents, built once per schema (patternBody). */
  private patterns = new Map<string, Expr>();
  /** States the schema's pattern automata may still explore (PATTERN_AUTOMATON). */
  private patternBudget = { states: PATTERN_AUTOMATON.statesPerSchema };

  /** The document in 2020-12 form (schema-drafts.ts); `original` is what the user wrote. */
  private root: Schema;
  private normalizedOf: WeakMap<object, Schema>;

  constructor(private original: Schema, private draft: Draft, private ws: Expr) {
    ({ doc: this.root, of: this.normalizedOf } = normalizeDocument(original, draft));
    this.rankKeys(original);
    this.indexDocument();
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
      // Names in dependencies get ranks too, so no two keys of one object are left unranked.
      for (const d of [o.dependentRequired, o.dependencies, o.dependentSchemas])
        if (d && typeof d === 'object' && !Array.isArray(d))
          for (const [k, v] of Object.entries(d)) {
            add(k);
            if (Array.isArray(v)) for (const x of v) if (typeof x === 'string') add(x);
          }
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

  /** Anchors, nested $ids and the root's $id, found once before converting. */
  private indexDocument(): void {
    if (typeof this.original !== 'object') return;
    const idKey = this.draft === 4 ? 'id' : '$id';
    const rootId = this.original[idKey];
    if (typeof rootId === 'string') this.rootId = rootId.replace(/#.*$/, '');
    // Depth is bounded by checkSchemaShape (compile-limits.ts), so recursion is safe here.
    // Anchors are found in the original (pointers name places there); $ref in the rewrite.
    const findAnchors = (n: unknown, ptr: string): void => {
      if (!n || typeof n !== 'object') return;
      if (Array.isArray(n)) return n.forEach((x, i) => findAnchors(x, `${ptr}/${i}`));
      const o = n as SchemaObject;
      const id = o[idKey];
      if (typeof o.$anchor === 'string' && this.draft >= 2019 && !this.anchors.has(o.$anchor)) this.anchors.set(o.$anchor, ptr);
      if (typeof id === 'string' && this.draft <= 7 && /^#[A-Za-z_][\w.:-]*$/.test(id) && !this.anchors.has(id.slice(1))) this.anchors.set(id.slice(1), ptr);
      for (const [k, v] of Object.entries(o)) if (k !== 'enum' && k !== 'const' && k !== 'default' && k !== 'examples') findAnchors(v, `${ptr}/${escapePointer(k)}`);
    };
    findAnchors(this.original, '#');
    const walk = (n: unknown): boolean => {
      if (!n || typeof n !== 'object') return false;
      let hasRef = false;
      if (Array.isArray(n)) {
        for (const x of n) hasRef = walk(x) || hasRef;
        return hasRef;
      }
      const o = n as SchemaObject;
      for (const [k, v] of Object.entries(o)) {
        if (k === '$ref' && typeof v === 'string') hasRef = true;
        else if (k !== 'enum' && k !== 'const' && k !== 'default' && k !== 'examples') hasRef = walk(v) || hasRef;
      }
      if (hasRef) this.holdsRef.add(o);
      return hasRef;
    };
    walk(this.root);
  }

  private resolvePointer(refText: string, place: string): { node: Schema; ptr: string } {
    let local = refText;
    if (this.rootId && local.startsWith(this.rootId) && (local.length === this.rootId.length || local[this.rootId.length] === '#'))
      local = local.slice(this.rootId.length) || '#';
    if (!local.startsWith('#'))
      throw new ConstraintError(`$ref ${JSON.stringify(refText)} is not a local reference (only '#...' pointers and anchors are supported)`, place);
    let path = local.slice(1);
    if (path !== '' && !path.startsWith('/')) {
      const target = this.anchors.get(decodeURIComponent(path));
      if (target === undefined) throw new ConstraintError(`$ref ${JSON.stringify(refText)}: no anchor named ${JSON.stringify(path)}`, place);
      path = target.slice(1);
    }
    let node: unknown = this.original;
    for (const raw of path === '' ? [] : path.slice(1).split('/')) {
      let key: string;
      try {
        key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      } catch {
        throw new ConstraintError(`$ref ${JSON.stringify(refText)} is not a valid JSON pointer`, place);
      }
      if (!node || typeof node !== 'object' || !Object.hasOwn(node as object, key))
        throw new ConstraintError(`$ref ${JSON.stringify(refText)} points to nothing`, place);
      node = (node as Record<string, unknown>)[key];
    }
    if (typeof node !== 'boolean' && (!node || typeof node !== 'object' || Array.isArray(node)))
      throw new ConstraintError(`$ref ${JSON.stringify(refText)} does not point to a schema`, place);
    if (typeof node === 'boolean') return { node, ptr: '#' + path };
    // A place the rewrite dropped (beside a $ref before 2019-09) is rewritten on its own.
    let normalized = this.normalizedOf.get(node as object);
    if (normalized === undefined) {
      const part = normalizeDocument(node as Schema, this.draft);
      normalized = part.doc;
    }
    return { node: normalized, ptr: '#' + path };
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
  /**
   * Inlines $ref and allOf into one schema object (used where constraints must combine). The
   * targets it inlines are added to `inlined`; while a node built from them is converted they
   * stay active, and inlining an active target again (a recursive $ref with other keywords
   * beside it) is refused instead of unrolled without end.
   */
  private flatten(s: Schema, place: string, inlined: string[] = []): Schema {
    if (typeof s === 'boolean') return s;
    let out: SchemaObject = { ...s };
    const parts: Schema[] = [];
    if (out.$ref !== undefined) {
      const { node, ptr } = this.resolvePointer(out.$ref as string, place);
      delete out.$ref;
      if (this.inlining.includes(ptr) || this.activeInlines.includes(ptr))
        throw new ConstraintError(`recursive $ref ${JSON.stringify(ptr)} combined with other keywords or allOf is not supported`, place);
      if (++this.inlinedCount > MAX_INLINED_REFS) throw overLimit('the number of inlined $ref (with other keywords beside them)', this.inlinedCount, MAX_INLINED_REFS, place);
      inlined.push(ptr);
      this.inlining.push(ptr);
      try {
        parts.push(this.flatten(node, ptr, inlined));
      } finally {
        this.inlining.pop();
      }
    }
    if (out.allOf !== undefined) {
      (out.allOf as Schema[]).forEach((p, i) => parts.push(this.flatten(p, `${place}/allOf/${i}`, inlined)));
      delete out.allOf;
    }
    for (const p of parts) {
      if (p === false) return false;
      if (p === true) continue;
      if (p.unevaluatedProperties !== undefined || p.unevaluatedItems !== undefined)
        throw new ConstraintError('unevaluatedProperties/unevaluatedItems inside allOf or $ref together with anyOf/oneOf is not supported', place);
      out = mergeSchemas(out, p, place, this.canon);
    }
    return resolveUnevaluated(out);
  }

  /** flatten() as an object schema (true is {}, false accepts nothing). */
  private flattenObject(s: Schema, place: string): SchemaObject {
    const f = this.flatten(s, place);
    return f === true ? {} : f === false ? { not: {} } : f;
  }

  private hasConstraints(s: SchemaObject): boolean {
    return Object.keys(s).some((k) => VALIDATION_KEYWORDS.has(k));
  }

  // ---- values ----------------------------------------------------------------------------

  /** The grammar of the values `s` accepts; null when it accepts none. */
  convert(s: Schema, place: string): Expr | null {
    if (s === true) return this.anyValue();
    if (s === false) return null;
    if (!s || typeof s !== 'object' || Array.isArray(s)) throw new ConstraintError('a schema must be an object or a boolean', place);
    if (s.$id !== undefined && place !== '#' && this.holdsRef.has(s) && !(typeof s.$id === 'string' && s.$id.startsWith('#')))
      throw new ConstraintError('$id inside a schema, with $ref below it, is not supported', place);
    if (s.$ref !== undefined) {
      const rest = { ...s };
      delete rest.$ref;
      if (!this.hasConstraints(rest)) return this.refExpr(s.$ref as string, `${place}/$ref`);
    }
    const inlined: string[] = [];
    const node = this.flatten(s, place, inlined);
    if (typeof node === 'boolean') return this.convert(node, place);
    // The targets inlined here stay active while their combination is converted (see flatten).
    this.activeInlines.push(...inlined);
    try {
      return this.convertFlat(node, place);
    } finally {
      this.activeInlines.length -= inlined.length;
    }
  }

  /** convert() for a node whose $ref and allOf are merged into it. */
  private convertFlat(node: SchemaObject, place: string): Expr | null {
    this.checkKeywords(node, place);
    const dependent = dependentAsBranches(node, place);
    if (dependent) return this.convertFlat(dependent, place);

    const branchKey = node.anyOf !== undefined ? 'anyOf' : node.oneOf !== undefined ? 'oneOf' : undefined;
    if (branchKey) {
      // ajv's annotation tracking across branches differs from one branch's merge: refused.
      for (const k of ['unevaluatedProperties', 'unevaluatedItems'])
        if (node[k] !== undefined) throw new ConstraintError(`keyword '${k}' beside anyOf/oneOf is not supported`, `${place}/${k}`);
      const base = { ...node };
      delete base.anyOf;
      delete base.oneOf;
      const bare = !this.hasConstraints(base);
      const list = node[branchKey] as Schema[];
      if (list.length > LIMITS.properties) throw overLimit(`the number of '${branchKey}' branches`, list.length, LIMITS.properties, `${place}/${branchKey}`);
      const branches = list.map((b, i) => {
        const p = `${place}/${branchKey}/${i}`;
        // Without constraints beside the list a branch converts as it is, so a branch that is a
        // $ref stays a rule reference (recursion through anyOf/oneOf becomes a recursive rule).
        if (bare && branchKey === 'anyOf') return { place: p, schema: b, flat: b, inlined: [] as string[] };
        const inlined: string[] = [];
        const fb = this.flatten(b, p, inlined);
        const merged = fb === true ? base : fb === false ? false : mergeSchemas(base, fb, p, this.canon);
        return bare ? { place: p, schema: b, flat: merged, inlined: [] } : { place: p, schema: merged, flat: merged, inlined };
      });
      if (branchKey === 'oneOf') this.checkDisjoint(branches.map((b) => b.flat), place);
      const alts: Expr[] = [];
      for (const b of branches) {
        this.activeInlines.push(...b.inlined);
        try {
          const e = this.convert(b.schema, b.place);
          if (e) alts.push(e);
        } finally {
          this.activeInlines.length -= b.inlined.length;
        }
      }
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
      // Annotations and keywords no draft defines are ignored, as ajv ignores them.
      if (ANNOTATIONS.has(k) || !VALIDATION_KEYWORDS.has(k)) continue;
      if (k === 'uniqueItems' && s.uniqueItems === false) continue;
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
    if (node.enum !== undefined && !Array.isArray(node.enum)) throw new ConstraintError("'enum' must be an array", `${place}/enum`);
    let values = (node.enum ?? [node.const]) as unknown[];
    if (values.length > LIMITS.properties) throw overLimit("the number of 'enum' values", values.length, LIMITS.properties, `${place}/enum`);
    if (node.const !== undefined && node.enum !== undefined) {
      const c = this.canon(node.const);
      values = values.some((v) => this.canon(v) === c) ? [node.const] : [];
    }
    const rest: SchemaObject = { ...node };
    delete rest.const;
    delete rest.enum;
    if (values.length && this.hasConstraints(rest)) {
      const check = this.valueChecker(rest, place);
      values = values.filter((v) => check(v));
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

  /**
   * ajv's verdict on values against a schema node of this document (in 2020-12 form), for enum
   * and const values checked against the keywords beside them. One fresh ajv per conversion,
   * holding this document only, so `$ref`s beside an enum resolve against it.
   */
  private valueChecker(node: SchemaObject, place: string): (v: unknown) => boolean {
    try {
      if (!this.enumAjv) {
        this.enumAjv = freshAjv(2020, { allErrors: false, meta: false, validateSchema: false });
        const root = ajvCopy(this.root, 2020);
        if (root && typeof root === 'object') {
          delete (root as SchemaObject).$id;
          this.enumAjv.addSchema(root as object, DOCUMENT_KEY);
        }
      }
      const copy = ajvCopy(node, 2020) as SchemaObject;
      delete copy.$id;
      const validate = this.enumAjv.compile(this.rebaseRefs(copy) as object);
      return (v) => validate(v) === true;
    } catch (e) {
      if (e instanceof ConstraintError) throw e;
      throw new ConstraintError(`invalid JSON schema beside 'enum'/'const': ${(e as Error).message}`, place);
    }
  }

  /** A copy whose local $refs name this document by DOCUMENT_KEY (bounded depth: see checkSchemaShape). */
  private rebaseRefs(v: unknown): unknown {
    if (!v || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map((x) => this.rebaseRefs(x));
    const out: SchemaObject = {};
    for (const [k, x] of Object.entries(v as SchemaObject)) {
      if (k === '__proto__') continue;
      if (k === 'enum' || k === 'const' || k === 'default' || k === 'examples') out[k] = x;
      else if (k === '$ref' && typeof x === 'string') {
        const { ptr } = this.resolvePointer(x, '#');
        out[k] = DOCUMENT_KEY + ptr;
      } else out[k] = this.rebaseRefs(x);
    }
    return out;
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
    // Numbers are finite (json-text.ts); bounds are checked exactly on their digits.
    const num = (k: string) => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
    let lo = -Infinity, loExcl = false, hi = Infinity, hiExcl = false;
    if (num('minimum') !== undefined) lo = num('minimum')!;
    if (num('exclusiveMinimum') !== undefined && num('exclusiveMinimum')! >= lo) [lo, loExcl] = [num('exclusiveMinimum')!, true];
    if (num('maximum') !== undefined) hi = num('maximum')!;
    if (num('exclusiveMaximum') !== undefined && num('exclusiveMaximum')! <= hi) [hi, hiExcl] = [num('exclusiveMaximum')!, true];
    for (const v of [lo, hi])
      if (Number.isFinite(v) && Math.abs(v) > Number.MAX_SAFE_INTEGER)
        throw new ConstraintError('numeric bounds beyond 2^53 are not supported', place);
    // ajv-formats' number formats: int32 and int64 hold integers only (int32 within 32 bits).
    if (s.format === 'int32' || s.format === 'int64') integer = true;
    if (s.format === 'int32') {
      if (lo < -(2 ** 31)) [lo, loExcl] = [-(2 ** 31), false];
      if (hi > 2 ** 31 - 1) [hi, hiExcl] = [2 ** 31 - 1, false];
    }
    const m = s.multipleOf;
    if (m !== undefined) {
      if (typeof m !== 'number' || !(m > 0)) throw new ConstraintError("'multipleOf' must be a number above 0", `${place}/multipleOf`);
      if (!Number.isInteger(m))
        throw new ConstraintError('multipleOf with a fraction is not supported (ajv checks it in floating point)', `${place}/multipleOf`);
      // Multiples of an integer are integers.
      integer = true;
    }
    const bounded = lo !== -Infinity || hi !== Infinity;
    if (integer) {
      const a = lo === -Infinity ? lo : loExcl ? Math.floor(lo) + 1 : Math.ceil(lo);
      const b = hi === Infinity ? hi : hiExcl ? Math.ceil(hi) - 1 : Math.floor(hi);
      if (a > b) return null;
      if (m !== undefined && m !== 1) return multiplesExpr(m as number, a, b, `${place}/multipleOf`, (name, make) => this.shared(name, make));
      // ajv checks multipleOf with parseInt, which misreads the exponent form.
      if (!bounded) return m === 1 ? integerRange(a, b, true) : INTEGER;
      return integerRange(a, b, m === 1);
    }
    if (!bounded) return NUMBER;
    if (lo > hi || (lo === hi && (loExcl || hiExcl))) return null;
    return decimalRange(lo, loExcl, hi, hiExcl, place);
  }

  private jsonChars(): Expr {
    return this.shared('json-char', () => jsonChar(ALL_CHARS));
  }

  /**
   * A pattern's string contents. Unanchored ones (any text before or after a match) are written as
   * their deterministic automaton (regex-automata.ts): as an expression they are one parse per
   * place a match could start, and masks cost a vocabulary walk per parse. Each pattern is built
   * once per schema.
   */
  private patternBody(pattern: string, place: string): Expr {
    const known = this.patterns.get(pattern);
    if (known) return known;
    const branches = regexBranches(pattern, 'u', place);
    const anyText = (byRef: boolean) => rep(byRef ? this.jsonChars() : jsonChar(ALL_CHARS), 0, Infinity);
    const body = (byRef: boolean) =>
      altOf(branches.map((b) => seq(b.anchoredStart ? EMPTY : anyText(byRef), jsonEncodeChars(b.expr), b.anchoredEnd ? EMPTY : anyText(byRef))));
    let out: Expr | null = null;
    // An anchored pattern is an automaton only where some state takes every safe run without
    // looping (`.+` then a suffix: every place of it is a parse per suffix position, each
    // walking the vocabulary); elsewhere its expression's parses do as well.
    const anchored = branches.every((b) => b.anchoredStart && b.anchoredEnd);
    if (!anchored || branches.some((b) => repeatsAnySafeChar(b.expr))) {
      const dfa = deterministicRegex(body(false), `pattern${this.patterns.size}`, place, { ...PATTERN_AUTOMATON, budget: this.patternBudget, needsTaker: anchored });
      if (dfa) {
        for (const r of dfa.rules) this.rules.set(r.name, r);
        out = dfa.expr;
      }
    }
    out ??= body(true);
    this.patterns.set(pattern, out);
    return out;
  }

  private stringExpr(s: SchemaObject, place: string): Expr | null {
    if (s.format !== undefined && !checksStrings(s.format)) {
      s = { ...s };
      delete s.format;
    }
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
    if (s.pattern !== undefined) return seq(lit('"'), this.patternBody(s.pattern as string, `${place}/pattern`), lit('"'));
    if (!hasLength) return this.shared('string', () => seq(lit('"'), rep(this.jsonChars(), 0, Infinity), lit('"')));
    if (minLength > LIMITS.repeat) throw overLimit("'minLength'", minLength, LIMITS.repeat, `${place}/minLength`);
    if (maxLength !== Infinity && maxLength > LIMITS.repeat) throw overLimit("'maxLength'", maxLength, LIMITS.repeat, `${place}/maxLength`);
    return seq(lit('"'), rep(this.jsonChars(), minLength, maxLength), lit('"'));
  }

  /** Any JSON value. */
  private anyValue(): Expr {
    return this.shared('value', () => {
      const ws = this.ws;
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
    const ws = this.ws;
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
    // ajv's generated code reads data.__proto__, which every object has: its verdicts on such a
    // property are not the specification's, and the grammar cannot follow them.
    if (declaredKeys.includes('__proto__') || required.has('__proto__'))
      throw new ConstraintError('a property named "__proto__" is not supported', `${place}/properties`);
    const keys = [...new Set([...declaredKeys, ...required])].sort(
      (a, b) => (this.keyRank.get(a) ?? Infinity) - (this.keyRank.get(b) ?? Infinity),
    );
    const ws = this.ws;
    const members: { key: string; expr: Expr; required: boolean }[] = [];
    const names = s.propertyNames as Schema | undefined;
    const nameOk = names === undefined || names === true ? () => true : names === false ? () => false : this.valueChecker(this.flattenObject(names, `${place}/propertyNames`), `${place}/propertyNames`);
    for (const key of keys) {
      const declared = Object.hasOwn(props, key);
      if (!nameOk(key)) {
        if (required.has(key)) return null;
        continue;
      }
      const schema = declared ? props[key] : additional;
      const valuePlace = declared ? `${place}/properties/${escapePointer(key)}` : `${place}/additionalProperties`;
      const value = this.convert(schema, valuePlace);
      if (value === null) {
        if (required.has(key)) return null;
        continue;
      }
      members.push({ key, expr: seq(lit(JSON.stringify(key)), ws, lit(':'), ws, value), required: required.has(key) });
    }
    const extraBody = this.extraMembers(s, keys, place);
    // One rule: every place of the object refers to it instead of copying the key trie.
    const extra = extraBody && this.rule(`obj${this.rules.size}-extra`, extraBody, place);
    const sep = seq(ws, lit(','), ws);
    // Counting members for min/maxProperties: counts above `cap` are all alike.
    const minP = typeof s.minProperties === 'number' ? s.minProperties : 0;
    const maxP = typeof s.maxProperties === 'number' ? s.maxProperties : Infinity;
    if (minP > maxP) return null;
    const cap = maxP !== Infinity ? maxP : minP;
    if (cap > LIMITS.properties) throw overLimit(`'${maxP !== Infinity ? 'maxProperties' : 'minProperties'}'`, cap, LIMITS.properties, place);
    if (2 * (members.length + 1) * (cap + 1) > LIMITS.grammarRules)
      throw overLimit('the object members times the counts min/maxProperties needs', 2 * (members.length + 1) * (cap + 1), LIMITS.grammarRules, place);
    // after(i, c, started): members from i on still to come, c written so far (capped), and
    // whether one was written (so a separator comes first). Extra members may come between
    // declared ones, so any key order that keeps the declared keys in schema order is accepted
    // (canonicalJson writes keys the schema does not declare by their rank anywhere).
    // The grammar is unambiguous: an extra member keeps i, and skipping optional members is a
    // separate chain (pick) that must end in a declared member. Were extras reachable after each
    // skip, a text inside an extra key would be parsed once per skippable member, and the
    // recognizer's states (sets of parses) would grow with the number of properties.
    const id = this.rules.size;
    const next = (c: number) => (maxP === Infinity ? Math.min(c + 1, cap) : c + 1);
    const optionalFrom: boolean[] = new Array(members.length + 1).fill(true);
    for (let i = members.length - 1; i >= 0; i--) optionalFrom[i] = optionalFrom[i + 1] && !members[i].required;
    const after = (i: number, c: number, started: boolean): Expr =>
      this.shared(`obj${id}-${i}-${c}-${started ? 1 : 0}`, () => {
        const lead = started ? sep : EMPTY;
        const alts: Expr[] = [];
        if (optionalFrom[i] && c >= minP) alts.push(EMPTY);
        if (extra && c < maxP) alts.push(seq(lead, extra, after(i, next(c), true)));
        if (i < members.length) alts.push(pick(i, c, started));
        return altOf(alts);
      });
    // pick(i, c, started): the next declared member is member i or, skipping optional ones, a later one.
    const pick = (i: number, c: number, started: boolean): Expr =>
      this.shared(`obj${id}-pick${i}-${c}-${started ? 1 : 0}`, () => {
        const m = members[i];
        const alts: Expr[] = [];
        if (c < maxP) alts.push(seq(started ? sep : EMPTY, m.expr, after(i + 1, next(c), true)));
        if (!m.required && i + 1 < members.length) alts.push(pick(i + 1, c, started));
        return altOf(alts);
      });
    return seq(lit('{'), ws, after(0, 0, false), ws, lit('}'));
  }

  /**
   * One member whose key the schema does not declare, or null when there can be none. Its key
   * comes from patternProperties or propertyNames when present, else is any key but the
   * declared ones; its value from the matching pattern's schema or additionalProperties.
   */
  private extraMembers(s: SchemaObject, declared: string[], place: string): Expr | null {
    const additional = (s.additionalProperties ?? true) as Schema;
    const patterns = Object.entries((s.patternProperties ?? {}) as Record<string, Schema>);
    const names = s.propertyNames as Schema | undefined;
    const member = (key: Expr | null, value: Expr | null) => (key === null || value === null ? null : seq(key, this.ws, lit(':'), this.ws, value));
    if (patterns.length === 0 && (names === undefined || names === true))
      return member(this.keyNotIn(declared), this.convert(additional, `${place}/additionalProperties`));
    if (patterns.length && names !== undefined && names !== true)
      throw new ConstraintError('patternProperties together with propertyNames is not supported', `${place}/propertyNames`);
    if (names !== undefined && names !== true) {
      const namePlace = `${place}/propertyNames`;
      const keySchema = this.flatten(names, namePlace);
      if (keySchema === false || additional === false) return null;
      const check = this.valueChecker(typeof keySchema === 'object' ? keySchema : {}, namePlace);
      if (declared.some((k) => check(k)))
        throw new ConstraintError('propertyNames that a declared property also satisfies is not supported unless additionalProperties is false', namePlace);
      const key = this.convert(mergeSchemas(keySchema === true ? {} : keySchema, { type: 'string' }, namePlace, this.canon), namePlace);
      return member(key, this.convert(additional, `${place}/additionalProperties`));
    }
    // patternProperties: with further keys allowed, a key matching no pattern would need the
    // pattern's complement, which a grammar cannot build here.
    const patternPlace = `${place}/patternProperties`;
    const value0 = JSON.stringify(patterns[0][1]);
    if (patterns.some(([, v]) => JSON.stringify(v) !== value0))
      throw new ConstraintError('several patternProperties with different schemas are not supported', patternPlace);
    if (additional !== false) {
      if (patterns.every(([, v]) => v === true || (typeof v === 'object' && !this.hasConstraints(v)))) return member(this.keyNotIn(declared), this.convert(additional, `${place}/additionalProperties`));
      throw new ConstraintError('patternProperties are supported with additionalProperties: false (or schemas that accept anything)', patternPlace);
    }
    for (const k of declared)
      for (const [p] of patterns)
        if (jsRegex(p, patternPlace).test(k))
          throw new ConstraintError(`patternProperties: declared property ${JSON.stringify(k)} matches the pattern ${JSON.stringify(p)}, which is not supported`, patternPlace);
    const keys = patterns.map(([p]) => this.stringExpr({ type: 'string', pattern: p }, `${patternPlace}/${escapePointer(p)}`)).filter((e): e is Expr => e !== null);
    return member(keys.length ? altOf(keys) : null, this.convert(patterns[0][1], `${patternPlace}/${escapePointer(patterns[0][0])}`));
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
    // Every branch ends with the closing quote, and a key that has left the names goes on in
    // one shared rule: the recognizer is then in one state inside any such key, whichever name
    // prefix it left from, so the masks there are computed once.
    const rest = this.shared('key-rest', () => seq(rep(this.jsonChars(), 0, Infinity), lit('"')));
    const build = (node: Node): Expr => {
      const alts: Expr[] = [];
      if (!node.end) alts.push(lit('"'));
      const used: number[] = [];
      for (const [cp, child] of node.next) {
        alts.push(seq(jsonChar([cp, cp]), build(child)));
        used.push(cp, cp);
      }
      const others: CodePointSet = complementSet(used.length ? normalize(used) : []);
      // Names are mostly printable ASCII: then every other character leaves them the same way,
      // through one shared rule, and the recognizer is in the same state inside such a
      // character (its UTF-8 bytes, an escape) whichever name prefix it left from.
      const sharedPart = intersectSets(others, NOT_PRINTABLE_ASCII);
      if (sharedPart.length === NOT_PRINTABLE_ASCII.length && sharedPart.every((x, k) => x === NOT_PRINTABLE_ASCII[k])) {
        const printable = subtractSet(others, NOT_PRINTABLE_ASCII);
        if (printable.length) alts.push(seq(jsonChar(printable), rest));
        alts.push(this.shared('key-rest-other', () => seq(jsonChar(NOT_PRINTABLE_ASCII), rest)));
      } else if (others.length) alts.push(seq(jsonChar(others), rest));
      return altOf(alts);
    };
    return seq(lit('"'), build(rootNode));
  }
}

function jsRegex(source: string, place: string): RegExp {
  try {
    return new RegExp(source, 'u');
  } catch (e) {
    throw new ConstraintError(`invalid pattern ${JSON.stringify(source)}: ${(e as Error).message}`, place);
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

/**
 * unevaluatedProperties/Items of a node whose $ref and allOf are merged into it: the keys (items)
 * it evaluates are its properties and patternProperties (prefixItems), so the keyword says what
 * additionalProperties (items) would. Beside anyOf/oneOf it is left for each branch merged with
 * the node, which counts one branch's evaluations where the specification counts every branch
 * that matches: never more values than ajv accepts, sometimes fewer.
 */
function resolveUnevaluated(o: SchemaObject): SchemaObject {
  if (o.unevaluatedProperties === undefined && o.unevaluatedItems === undefined) return o;
  if (o.anyOf !== undefined || o.oneOf !== undefined || o.dependentSchemas !== undefined || o.dependentRequired !== undefined) return o;
  const out = { ...o };
  if (out.unevaluatedProperties !== undefined) {
    if (out.additionalProperties === undefined) out.additionalProperties = out.unevaluatedProperties;
    delete out.unevaluatedProperties;
  }
  if (out.unevaluatedItems !== undefined) {
    if (out.items === undefined) out.items = out.unevaluatedItems;
    delete out.unevaluatedItems;
  }
  return out;
}

/** Dependencies per object beyond which their combinations (two branches each) are refused. */
const MAX_DEPENDENCIES = 6;

/**
 * dependentRequired / dependentSchemas as anyOf: per trigger property, "absent" or "present and
 * what it brings". Triggers that are required need only the second branch.
 */
function dependentAsBranches(node: SchemaObject, place: string): SchemaObject | null {
  if (node.dependentRequired === undefined && node.dependentSchemas === undefined) return null;
  const required = new Set(Array.isArray(node.required) ? (node.required as string[]) : []);
  const entries: [string, Schema][] = [];
  for (const [k, names] of Object.entries((node.dependentRequired ?? {}) as Record<string, unknown>))
    if (Array.isArray(names) && names.length) entries.push([k, { required: [k, ...names] }]);
  for (const [k, sub] of Object.entries((node.dependentSchemas ?? {}) as Record<string, Schema>))
    if (sub !== true) entries.push([k, { allOf: [{ required: [k] }, sub] }]);
  const out: SchemaObject = { ...node };
  delete out.dependentRequired;
  delete out.dependentSchemas;
  if (entries.length === 0) return out;
  const optional = entries.filter(([k]) => !required.has(k));
  if (optional.length > MAX_DEPENDENCIES)
    throw new ConstraintError(`more than ${MAX_DEPENDENCIES} dependentRequired/dependentSchemas on properties that are not required is not supported`, place);
  if (out.anyOf !== undefined || out.oneOf !== undefined)
    throw new ConstraintError('dependentRequired/dependentSchemas beside anyOf/oneOf is not supported', place);
  let branches: Schema[][] = [[]];
  for (const [k, present] of entries) {
    const choices: Schema[] = required.has(k) ? [present] : [{ properties: { [k]: false } }, present];
    branches = branches.flatMap((b) => choices.map((c) => [...b, c]));
  }
  out.anyOf = branches.map((parts) => ({ allOf: parts }));
  return out;
}
