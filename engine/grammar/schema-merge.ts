// allOf as one schema: the constraints of all parts combined keyword by keyword, so the grammar
// is built once for the intersection. Parts must already be free of $ref and allOf (the
// converter inlines those first). Combinations that a single schema cannot express (two
// different patterns, two anyOf lists) are refused.

import { ConstraintError } from './constraint-error';

export type SchemaObject = Record<string, unknown>;
export type Schema = SchemaObject | boolean;

const JSON_TYPES = ['null', 'boolean', 'object', 'array', 'number', 'integer', 'string'];

/** The `type` keyword as a list (with `nullable: true` folded in); undefined when absent. */
export function typeList(s: SchemaObject): string[] | undefined {
  if (s.type === undefined) return undefined;
  const list = Array.isArray(s.type) ? [...(s.type as string[])] : [s.type as string];
  if (s.nullable === true && !list.includes('null')) list.push('null');
  return list;
}

function intersectTypes(a: string[] | undefined, b: string[] | undefined): string[] | undefined {
  if (!a) return b;
  if (!b) return a;
  const out: string[] = [];
  for (const t of JSON_TYPES) {
    const inA = a.includes(t) || (t === 'integer' && a.includes('number'));
    const inB = b.includes(t) || (t === 'integer' && b.includes('number'));
    if (inA && inB && !(t === 'integer' && out.includes('number'))) out.push(t);
  }
  return out;
}

function both(x: Schema | undefined, y: Schema | undefined): Schema | undefined {
  if (x === undefined || x === true) return y;
  if (y === undefined || y === true) return x;
  if (x === false || y === false) return false;
  return { allOf: [x, y] };
}

export function mergeSchemas(a: SchemaObject, b: SchemaObject, place: string, canon: (v: unknown) => string): SchemaObject {
  const out: SchemaObject = { ...a };
  delete out.nullable;
  const types = intersectTypes(typeList(a), typeList(b));
  if (types) out.type = types;

  // Objects: a key either side declares gets both sides' constraint for it.
  if (a.properties || b.properties || a.additionalProperties !== undefined || b.additionalProperties !== undefined) {
    const pa = (a.properties ?? {}) as Record<string, Schema>;
    const pb = (b.properties ?? {}) as Record<string, Schema>;
    const aa = a.additionalProperties as Schema | undefined;
    const ab = b.additionalProperties as Schema | undefined;
    // No prototype: a key such as "__proto__" must stay an ordinary key.
    const props: Record<string, Schema> = Object.create(null);
    for (const k of new Set([...Object.keys(pa), ...Object.keys(pb)])) {
      props[k] = both(Object.hasOwn(pa, k) ? pa[k] : aa, Object.hasOwn(pb, k) ? pb[k] : ab) ?? true;
    }
    out.properties = props;
    const add = both(aa, ab);
    if (add === undefined) delete out.additionalProperties;
    else out.additionalProperties = add;
  }
  if (a.required || b.required) out.required = [...new Set([...((a.required ?? []) as string[]), ...((b.required ?? []) as string[])])];

  // Arrays: position by position.
  if (a.prefixItems || b.prefixItems || a.items !== undefined || b.items !== undefined) {
    const xa = (a.prefixItems ?? []) as Schema[];
    const xb = (b.prefixItems ?? []) as Schema[];
    const ia = a.items as Schema | undefined;
    const ib = b.items as Schema | undefined;
    const n = Math.max(xa.length, xb.length);
    const prefix: Schema[] = [];
    for (let i = 0; i < n; i++) prefix.push(both(i < xa.length ? xa[i] : ia, i < xb.length ? xb[i] : ib) ?? true);
    if (n) out.prefixItems = prefix;
    else delete out.prefixItems;
    const items = both(ia, ib);
    if (items === undefined) delete out.items;
    else out.items = items;
  }

  for (const k of ['minLength', 'minItems', 'minimum', 'exclusiveMinimum', 'minProperties', 'minContains'])
    if (b[k] !== undefined) out[k] = a[k] === undefined ? b[k] : Math.max(a[k] as number, b[k] as number);
  for (const k of ['maxLength', 'maxItems', 'maximum', 'exclusiveMaximum', 'maxProperties', 'maxContains'])
    if (b[k] !== undefined) out[k] = a[k] === undefined ? b[k] : Math.min(a[k] as number, b[k] as number);

  for (const k of ['pattern', 'format', 'multipleOf']) {
    if (b[k] === undefined) continue;
    if (a[k] !== undefined && a[k] !== b[k])
      throw new ConstraintError(`allOf combines two different '${k}' values (${JSON.stringify(a[k])} and ${JSON.stringify(b[k])}); not supported`, place);
    out[k] = b[k];
  }

  const va = a.const !== undefined ? [a.const] : (a.enum as unknown[] | undefined);
  const vb = b.const !== undefined ? [b.const] : (b.enum as unknown[] | undefined);
  if (va || vb) {
    delete out.const;
    if (va && vb) {
      const inB = new Set(vb.map(canon));
      out.enum = va.filter((v) => inB.has(canon(v)));
    } else out.enum = va ?? vb;
  }

  for (const k of ['anyOf', 'oneOf']) {
    if (b[k] === undefined) continue;
    if (out.anyOf !== undefined || out.oneOf !== undefined)
      throw new ConstraintError('allOf combines several anyOf/oneOf lists; not supported', place);
    out[k] = b[k];
  }
  // Anything else (annotations, or keywords the converter refuses later) is carried over.
  for (const [k, v] of Object.entries(b)) if (!(k in out) && k !== 'nullable') out[k] = v;
  return out;
}
