// Schemas with instances, grouped by keyword, for checking that the grammar accepts exactly
// the (canonical JSON of the) instances ajv accepts. Written for this project; the official
// JSON-Schema-Test-Suite run (grammar-suite.test.ts) complements it where available.

export interface SchemaCase {
  keyword: string;
  schema: object;
  instances: unknown[];
}

export const SCHEMA_CASES: SchemaCase[] = [
  { keyword: 'type', schema: { type: 'integer' }, instances: [0, -7, 12345678, 1.5, '1', null, true, [], {}] },
  { keyword: 'type', schema: { type: 'number' }, instances: [0, -0.5, 3.25e-7, 1e21, 'x', null] },
  { keyword: 'type', schema: { type: ['string', 'null'] }, instances: ['', 'a"b\\c\n\u0001é😀', null, 0, false] },
  { keyword: 'type', schema: { type: 'boolean' }, instances: [true, false, 0, 'true'] },
  { keyword: 'nullable', schema: { type: 'integer', nullable: true }, instances: [null, 3, 'x'] },
  {
    keyword: 'properties',
    schema: { type: 'object', properties: { a: { type: 'string' }, b: { type: 'integer' } } },
    instances: [{}, { a: 'x' }, { b: 1 }, { a: 'x', b: 2 }, { b: 'no' }, { a: 1 }, { a: 'x', c: [1, { d: null }] }, []],
  },
  {
    keyword: 'required',
    schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a', 'z'] },
    instances: [{ a: '', z: 0 }, { a: '' }, { z: 1 }, { z: {}, a: 'q', extra: true }],
  },
  {
    keyword: 'additionalProperties',
    schema: { type: 'object', properties: { a: { type: 'integer' } }, additionalProperties: false },
    instances: [{}, { a: 1 }, { b: 1 }, { a: 1, b: 2 }, { ab: 1 }],
  },
  {
    keyword: 'additionalProperties',
    schema: { type: 'object', properties: { id: { type: 'integer' } }, additionalProperties: { type: 'boolean' } },
    instances: [{ id: 1, x: true }, { x: false, y: true }, { id: 1, x: 1 }, { id: 'a' }, { i: true, idx: false, '': true }],
  },
  { keyword: 'enum', schema: { enum: ['red', 2, null, { a: [1] }, [true]] }, instances: ['red', 2, null, { a: [1] }, [true], 'blue', 2.5, { a: [2] }, [false]] },
  { keyword: 'enum', schema: { type: 'string', enum: ['a', 'b', 3] }, instances: ['a', 'b', 3, 'c'] },
  { keyword: 'const', schema: { const: { x: 1, y: 'two' } }, instances: [{ x: 1, y: 'two' }, { y: 'two', x: 1 }, { x: 1 }, 1] },
  { keyword: 'anyOf', schema: { anyOf: [{ type: 'string', maxLength: 2 }, { type: 'integer', minimum: 10 }] }, instances: ['ab', 'abc', 10, 9, null] },
  {
    keyword: 'oneOf',
    schema: {
      oneOf: [
        { type: 'object', properties: { kind: { const: 'a' }, n: { type: 'integer' } }, required: ['kind', 'n'], additionalProperties: false },
        { type: 'object', properties: { kind: { const: 'b' }, s: { type: 'string' } }, required: ['kind', 's'], additionalProperties: false },
      ],
    },
    instances: [{ kind: 'a', n: 1 }, { kind: 'b', s: 'x' }, { kind: 'a', s: 'x' }, { kind: 'c', n: 1 }],
  },
  { keyword: 'oneOf', schema: { oneOf: [{ type: 'string' }, { type: 'number' }] }, instances: ['x', 1.5, null] },
  {
    keyword: 'allOf',
    schema: { allOf: [{ type: 'object', properties: { a: { type: 'integer', minimum: 0 } }, required: ['a'] }, { properties: { a: { maximum: 5 }, b: { type: 'string' } }, required: ['b'] }] },
    instances: [{ a: 3, b: '' }, { a: 6, b: '' }, { a: 3 }, { b: 'x' }, { a: -1, b: 'x' }],
  },
  {
    keyword: 'allOf',
    schema: { allOf: [{ type: 'object', properties: { a: {} }, additionalProperties: false }, { type: 'object', properties: { b: {} } }] },
    instances: [{}, { a: 1 }, { b: 1 }],
  },
  {
    keyword: '$ref',
    schema: {
      $defs: { node: { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['v'], additionalProperties: false } },
      $ref: '#/$defs/node',
    },
    instances: [{ v: 1 }, { v: 1, kids: [{ v: 2, kids: [{ v: 3 }] }, { v: 4 }] }, { v: 1, kids: [{}] }, { kids: [] }],
  },
  { keyword: '$ref', schema: { $defs: { s: { type: 'string' } }, type: 'array', items: { $ref: '#/$defs/s', maxLength: 1 } }, instances: [['a', ''], ['ab'], [1]] },
  { keyword: 'items', schema: { type: 'array', items: { type: 'integer' } }, instances: [[], [1, 2, 3], [1, 'a'], ['a']] },
  {
    keyword: 'prefixItems',
    schema: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false },
    instances: [[], ['a'], ['a', 1], ['a', 1, 2], [1], ['a', 'b']],
  },
  { keyword: 'prefixItems', schema: { type: 'array', prefixItems: [{ type: 'string' }], items: { type: 'boolean' }, minItems: 2 }, instances: [['a', true], ['a'], ['a', true, false], ['a', 1]] },
  { keyword: 'minItems', schema: { type: 'array', minItems: 2, maxItems: 3 }, instances: [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4]] },
  { keyword: 'maxItems', schema: { type: 'array', maxItems: 2 }, instances: [[], [1], [1, 2], [1, 2, 3]] },
  { keyword: 'maxItems', schema: { type: 'array', items: { type: 'string' }, maxItems: 1 }, instances: [[], ['a'], ['a', 'b'], [1]] },
  { keyword: 'minLength', schema: { type: 'string', minLength: 2, maxLength: 3 }, instances: ['a', 'ab', 'abc', 'abcd', '😀😀', '\n\n', 'éé'] },
  { keyword: 'pattern', schema: { type: 'string', pattern: '^[a-z]+-\\d{2}$' }, instances: ['abc-12', 'abc-1', 'ABC-12', 'a-123', '-12'] },
  { keyword: 'pattern', schema: { type: 'string', pattern: 'o+b' }, instances: ['foobar', 'ob', 'bo', '', 'x"oob\\'] },
  { keyword: 'format', schema: { type: 'string', format: 'date' }, instances: ['2024-02-29', '2023-02-29', '1900-02-29', '2000-02-29', '2024-04-31', '2024-12-31', '2024-13-01', '24-01-01'] },
  { keyword: 'format', schema: { type: 'string', format: 'time' }, instances: ['12:34:56Z', '23:59:59.123+02:00', '12:34:56', '24:00:00Z', '12:60:00Z', '08:30:00-0530', '23:59:60Z', '22:59:60Z', '23:59:60.5-0000', '23:59:60+00', '23:58:60Z',
    // ajv reads the seconds as a double: from 59.999999999999996447… (the midpoint below 60) on they are 60 (a leap
    // second only at 23:59 UTC), and 60.999…9 is 61 (JSON-Schema-Test-Suite's date-time case).
    '00:59:59.999999999999999Z', '00:59:59.99999999999999Z', '23:59:59.999999999999999Z', '23:59:59.999999999999999+00:00',
    '23:59:60.999999999999999Z', '23:59:60.99999999999999Z', '00:59:59.999999999999996447286321199499070644378662109375Z',
    '00:59:59.999999999999996447286321199499070644378662109374Z', '00:59:59.9999999999999964472863211994990706443786621093751Z'] },
  { keyword: 'format', schema: { type: 'string', format: 'date-time' }, instances: ['2024-01-02T03:04:05Z', '2024-01-02t03:04:05.5+01:00', '2024-01-02 03:04:05Z', '2024-01-02T03:04:05', '2024-01-32T00:00:00Z',
    '1985-04-12T00:59:59.999999999999999Z', '1985-04-12T23:59:59.9999999999999999Z', '1985-04-12T00:59:59.9999999999999Z'] },
  { keyword: 'format', schema: { type: 'string', format: 'email' }, instances: ['a.b@example.com', 'x+y@sub.domain.org', 'no-at-sign', 'a@b', '@example.com', 'a..b@example.com'] },
  { keyword: 'format', schema: { type: 'string', format: 'uuid' }, instances: ['123e4567-e89b-12d3-a456-426614174000', 'urn:uuid:123E4567-E89B-12D3-A456-426614174000', '123e4567e89b12d3a456426614174000', 'g23e4567-e89b-12d3-a456-426614174000'] },
  { keyword: 'format', schema: { type: 'string', format: 'uri' }, instances: ['https://example.com/a/b?c=d#e', 'urn:isbn:0451450523', 'mailto:a@b.c', '/relative/path', 'http://exa mple.com', 'ftp://host:21/file', '1http://x', 'x:', 'ftp://[::1]/', 'http://[v7.x]/', 'http://[1:2]/'] },
  { keyword: 'format', schema: { type: 'string', format: 'ipv4' }, instances: ['192.168.0.1', '256.1.1.1', '1.2.3', '01.2.3.4'] },
  { keyword: 'minimum', schema: { type: 'integer', minimum: -15, maximum: 120 }, instances: [-15, -16, 0, 99, 120, 121, 1000, -100] },
  { keyword: 'minimum', schema: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 }, instances: [0, 1, 9, 10] },
  { keyword: 'minimum', schema: { type: 'number', minimum: -2, maximum: 3 }, instances: [-2, -2.5, -1.75, 0, 2.999, 3, 3.01, 0.5] },
  { keyword: 'minimum', schema: { type: 'number', exclusiveMinimum: 0 }, instances: [0, 0.001, 5, -0.5, 1e3] },
  { keyword: 'boolean schema', schema: { type: 'object', properties: { never: false, any: true } }, instances: [{}, { never: 1 }, { any: [1, { x: 'y' }] }] },
];
