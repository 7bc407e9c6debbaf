// JSON Schema drafts 04, 06, 07, 2019-09 and 2020-12. The draft is chosen from the root
// `$schema` (2020-12 when there is none). The converter works on one form, 2020-12's: the
// document is rewritten once (normalizeDocument), with a map from each original schema object
// to its rewrite so that JSON pointers, which name places in the original, still resolve. ajv
// gets a copy in its draft's own form with only what it refuses to read removed (`$schema`
// inside the document, draft-04's `id` under later drafts), and the ajv class of that draft.
//
// Vocabulary is not policed: a keyword the draft does not define is ignored, by ajv and by the
// converter alike ("x-…", `example`, `id` after draft-04), as the specification says. Structure
// is: the schema must be valid against its draft's meta-schema.

import { ConstraintError } from './constraint-error';
import type { Schema, SchemaObject } from './schema-merge';

export type Draft = 4 | 6 | 7 | 2019 | 2020;

const DRAFT_URLS: [RegExp, Draft][] = [
  [/json-schema\.org\/draft-04\/schema/, 4],
  [/json-schema\.org\/draft-06\/schema/, 6],
  [/json-schema\.org\/draft-07\/schema/, 7],
  [/json-schema\.org\/draft\/2019-09\/schema/, 2019],
  [/json-schema\.org\/draft\/2020-12\/schema/, 2020],
];

/** The draft a schema document is written in, from its root `$schema`. */
export function draftOf(schema: unknown): Draft {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return 2020;
  const url = (schema as SchemaObject).$schema;
  if (url === undefined) return 2020;
  if (typeof url !== 'string') throw new ConstraintError('$schema must be a string (the URL of a JSON Schema draft)', '#/$schema');
  for (const [re, d] of DRAFT_URLS) if (re.test(url)) return d;
  if (/json-schema\.org\/draft-0[0-3]\//.test(url))
    throw new ConstraintError(`$schema ${JSON.stringify(url)}: drafts before 04 are not supported (04, 06, 07, 2019-09 and 2020-12 are)`, '#/$schema');
  // "http://json-schema.org/schema#" means the latest draft; other meta-schemas are read as 2020-12.
  return 2020;
}

/** Keywords ajv enforces under some draft (with ajv-formats); any other keyword is an annotation or unknown. */
export const VALIDATION_KEYWORDS = new Set([
  '$ref', '$dynamicRef', '$dynamicAnchor', '$recursiveRef', '$recursiveAnchor', 'additionalItems', 'additionalProperties',
  'allOf', 'anyOf', 'const', 'contains', 'dependencies', 'dependentRequired', 'dependentSchemas', 'else', 'enum',
  'exclusiveMaximum', 'exclusiveMinimum', 'format', 'formatExclusiveMaximum', 'formatExclusiveMinimum', 'formatMaximum',
  'formatMinimum', 'if', 'items', 'maxContains', 'maxItems', 'maxLength', 'maxProperties', 'maximum', 'minContains',
  'minItems', 'minLength', 'minProperties', 'minimum', 'multipleOf', 'not', 'nullable', 'oneOf', 'pattern',
  'patternProperties', 'prefixItems', 'properties', 'propertyNames', 'required', 'then', 'type', 'unevaluatedItems',
  'unevaluatedProperties', 'uniqueItems',
]);

/** Keywords the drafts before 2019-09 do not have (ajv's classes for them ignore these). */
const NEWER_THAN_7 = ['dependentRequired', 'dependentSchemas', 'unevaluatedItems', 'unevaluatedProperties', 'prefixItems',
  'minContains', 'maxContains', '$dynamicRef', '$dynamicAnchor', '$recursiveRef', '$recursiveAnchor', '$anchor'];

/**
 * One schema node in 2020-12 form: draft-04's `id` and boolean exclusive bounds, the array form
 * of `items` with `additionalItems`, and `dependencies`. Only this node's keywords change; subschemas are rewritten when they are reached.
 */
export function normalizeNode(s: Schema, draft: Draft): Schema {
  if (typeof s !== 'object' || s === null || Array.isArray(s)) return s;
  let out: SchemaObject = { ...s };
  // Keywords beside a $ref apply in every draft here, as ajv (the final check) applies them.
  if (draft <= 7) for (const k of NEWER_THAN_7) delete out[k];
  if (draft === 4) {
    if (typeof out.id === 'string') out.$id = out.id;
    delete out.id;
    for (const [flag, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']]) {
      if (typeof out[flag] !== 'boolean') continue;
      if (out[flag] === true && typeof out[bound] === 'number') {
        out[flag] = out[bound];
        delete out[bound];
      } else delete out[flag];
    }
  } else if (draft <= 7 && out.$id === undefined && typeof out.id === 'string') delete out.id;
  if (draft <= 2019) {
    if (Array.isArray(out.items)) {
      out.prefixItems = out.items;
      if (out.additionalItems === undefined) delete out.items;
      else out.items = out.additionalItems;
    }
  }
  delete out.additionalItems;
  if (out.dependencies !== undefined && typeof out.dependencies === 'object' && out.dependencies !== null) {
    const req: Record<string, unknown> = { ...((out.dependentRequired as object) ?? {}) };
    const sch: Record<string, unknown> = { ...((out.dependentSchemas as object) ?? {}) };
    for (const [k, v] of Object.entries(out.dependencies as object)) {
      if (Array.isArray(v)) req[k] = v;
      else sch[k] = v;
    }
    delete out.dependencies;
    if (Object.keys(req).length) out.dependentRequired = req;
    if (Object.keys(sch).length) out.dependentSchemas = sch;
  }
  return out;
}

const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies'];
const SCHEMA_ONE = ['additionalProperties', 'additionalItems', 'items', 'unevaluatedItems', 'unevaluatedProperties', 'not', 'if',
  'then', 'else', 'contains', 'propertyNames', 'contentSchema'];
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];

/**
 * The copy of a schema document ajv compiles: `$schema` removed everywhere (the class already is
 * the draft; a nested one would name a meta-schema ajv has not loaded) and, after draft-04, an
 * `id` keyword (ajv refuses it outright, the draft ignores it). Recursion is bounded by the
 * document depth checked before (compile-limits.ts).
 */
export function ajvCopy(s: unknown, draft: Draft): unknown {
  return copySchema(s, (node) => {
    const out = { ...node };
    delete out.$schema;
    if (draft !== 4 && typeof out.id === 'string') delete out.id;
    return out;
  });
}

/** A schema document in 2020-12 form, and the rewrite of each original schema object. */
export interface NormalizedDocument {
  doc: Schema;
  of: WeakMap<object, Schema>;
}

/** Rewrites every schema node of a document into 2020-12 form (normalizeNode). */
export function normalizeDocument(root: Schema, draft: Draft): NormalizedDocument {
  const of = new WeakMap<object, Schema>();
  const doc = copySchema(root, (node) => normalizeNode(node, draft) as SchemaObject, of) as Schema;
  return { doc, of };
}

/**
 * A copy of a schema document with `rewrite` applied to each schema object before its
 * subschemas are copied. Recursion is bounded by the document depth checked before
 * (compile-limits.ts).
 */
function copySchema(s: unknown, rewrite: (node: SchemaObject) => SchemaObject, of?: WeakMap<object, Schema>): unknown {
  if (!s || typeof s !== 'object' || Array.isArray(s)) return s;
  const sub = (x: unknown) => copySchema(x, rewrite, of);
  const out: SchemaObject = {};
  for (const [k, v] of Object.entries(rewrite(s as SchemaObject))) {
    if (k === '__proto__') continue;
    if (SCHEMA_MAPS.includes(k) && v && typeof v === 'object' && !Array.isArray(v)) {
      // No prototype: a key such as "__proto__" must stay an ordinary key.
      const m: SchemaObject = Object.create(null);
      for (const [name, x] of Object.entries(v as SchemaObject)) m[name] = Array.isArray(x) ? x : sub(x);
      out[k] = m;
    } else if (SCHEMA_LISTS.includes(k) && Array.isArray(v)) out[k] = v.map(sub);
    else if (SCHEMA_ONE.includes(k)) out[k] = sub(v);
    else out[k] = v;
  }
  of?.set(s as object, out);
  return out;
}
