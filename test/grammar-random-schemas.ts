// Seeded random JSON schemas covering the supported keywords (types, bounds, lengths, formats,
// patterns, enums, const, nested objects and arrays, prefixItems, anyOf, type-disjoint oneOf,
// allOf, nullable, $ref to $defs including a recursive one), for the random-generation test.

import { mulberry32 } from './grammar-sampler';

type Rand = () => number;
type S = Record<string, unknown>;

const FORMATS = ['date', 'time', 'date-time', 'email', 'uuid', 'uri', 'ipv4'];
const PATTERNS = ['^[A-Z]{2}[0-9]{3}$', '^(yes|no|maybe)$', 'ab+c', '^\\d{3}-\\d{4}$', '^[a-z_][a-z0-9_]*$', '^\\w+@\\w+\\.com$'];
const NAMES = ['id', 'name', 'title', 'count', 'price', 'tags', 'when', 'meta', 'ok', 'kind', 'x', 'über', 'a b', 'note'];

export function randomSchema(seed: number): S {
  const r = mulberry32(seed * 7919 + 13);
  const defs: S = {
    leaf: { type: 'string', maxLength: 8 },
    tree: {
      type: 'object',
      properties: { v: { type: 'integer', minimum: 0, maximum: 9 }, kids: { type: 'array', maxItems: 2, items: { $ref: '#/$defs/tree' } } },
      required: ['v'],
      additionalProperties: false,
    },
  };
  const root = object(r, 0);
  root.$defs = defs;
  return root;
}

const pick = <T>(r: Rand, xs: T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

function value(r: Rand, depth: number): S {
  const kinds = depth >= 2 ? ['string', 'integer', 'number', 'boolean', 'enum', 'ref'] : ['string', 'integer', 'number', 'boolean', 'enum', 'const', 'object', 'array', 'anyOf', 'oneOf', 'allOf', 'nullable', 'ref', 'tuple'];
  switch (pick(r, kinds)) {
    case 'string': {
      const s: S = { type: 'string' };
      const v = r();
      if (v < 0.25) s.format = pick(r, FORMATS);
      else if (v < 0.45) s.pattern = pick(r, PATTERNS);
      else if (v < 0.8) {
        s.minLength = int(r, 0, 3);
        s.maxLength = (s.minLength as number) + int(r, 0, 12);
      }
      return s;
    }
    case 'integer': {
      const s: S = { type: 'integer' };
      if (r() < 0.7) s.minimum = int(r, -1000, 50);
      if (r() < 0.7) s.maximum = ((s.minimum as number | undefined) ?? -100) + int(r, 0, 5000);
      if (r() < 0.2) s.exclusiveMaximum = ((s.maximum as number | undefined) ?? 10) + 1;
      return s;
    }
    case 'number': {
      const s: S = { type: 'number' };
      if (r() < 0.6) s.minimum = int(r, -50, 10);
      if (r() < 0.6) s.maximum = ((s.minimum as number | undefined) ?? 0) + int(r, 1, 100);
      if (r() < 0.2) s.exclusiveMinimum = int(r, -60, -51);
      return s;
    }
    case 'boolean':
      return { type: 'boolean' };
    case 'enum':
      return { enum: [pick(r, ['red', 'green', 'blue']), int(r, 0, 9), null, { k: 'v' }, [1, 'x']].slice(0, int(r, 1, 5)) };
    case 'const':
      return { const: pick(r, ['fixed', 42, { nested: [true, null] }, ['a', 1]]) };
    case 'object':
      return object(r, depth + 1);
    case 'array': {
      const s: S = { type: 'array', items: value(r, depth + 1) };
      if (r() < 0.5) s.minItems = int(r, 0, 2);
      if (r() < 0.7) s.maxItems = ((s.minItems as number | undefined) ?? 0) + int(r, 0, 4);
      return s;
    }
    case 'tuple':
      return { type: 'array', prefixItems: [value(r, depth + 1), value(r, depth + 1)], items: r() < 0.5 ? false : { type: 'boolean' } };
    case 'anyOf':
      return { anyOf: [value(r, depth + 1), value(r, depth + 1)] };
    case 'oneOf':
      return { oneOf: [{ type: 'string', maxLength: 5 }, { type: 'integer' }, { type: 'null' }].slice(0, int(r, 2, 3)) };
    case 'allOf':
      return {
        allOf: [
          { type: 'object', properties: { a: { type: 'integer', minimum: 0 } }, required: ['a'] },
          { properties: { a: { maximum: 100 }, b: { type: 'string', maxLength: 4 } }, additionalProperties: false },
        ],
      };
    case 'nullable':
      return { type: ['integer', 'null'], minimum: 0, maximum: 99 };
    default:
      return { $ref: pick(r, ['#/$defs/leaf', '#/$defs/tree']) };
  }
}

function object(r: Rand, depth: number): S {
  const n = int(r, 1, 4);
  const props: S = {};
  const names = [...NAMES].sort(() => r() - 0.5).slice(0, n);
  for (const k of names) props[k] = value(r, depth);
  const s: S = { type: 'object', properties: props, required: names.filter(() => r() < 0.6) };
  const a = r();
  s.additionalProperties = a < 0.6 ? false : a < 0.8 ? { type: 'integer', minimum: 0, maximum: 9 } : true;
  return s;
}
