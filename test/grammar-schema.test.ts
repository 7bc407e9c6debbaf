import * as assert from 'assert';
import { canonicalJson, compileConstraint, ConstraintError } from '../engine/grammar';
import { schemaToGrammar } from '../engine/grammar/schema-to-grammar';
import { acceptsText } from './grammar-check-text';
import { SCHEMA_CASES } from './grammar-schema-cases';
import { mulberry32 } from './grammar-sampler';
import { worldTokenizer } from './grammar-vocab';

function refusedSchema(schema: object, fragments: string[]): ConstraintError {
  let err: unknown;
  try {
    compileConstraint({ jsonSchema: schema }, worldTokenizer());
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ConstraintError, `expected a ConstraintError for ${JSON.stringify(schema)}`);
  for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
  return err;
}

/** Whether ajv (through validateOutput) accepts the instance. */
function ajvAccepts(c: ReturnType<typeof compileConstraint>, value: unknown): boolean {
  try {
    c.validateOutput(JSON.stringify(value));
    return true;
  } catch (e) {
    assert.ok(e instanceof ConstraintError);
    return false;
  }
}

describe('JSON schema constraints', function () {
  this.timeout(120000);

  for (const { keyword, schema, instances } of SCHEMA_CASES) {
    it(`${keyword}: grammar accepts exactly what ajv accepts for ${JSON.stringify(schema).slice(0, 90)}`, () => {
      const c = compileConstraint({ jsonSchema: schema }, worldTokenizer());
      const { keyRank } = schemaToGrammar(schema as Record<string, unknown>);
      let valid = 0;
      for (const inst of instances) {
        const text = canonicalJson(inst, keyRank);
        const expected = ajvAccepts(c, inst);
        valid += expected ? 1 : 0;
        assert.strictEqual(acceptsText(c, text), expected, `${text} should be ${expected ? 'accepted' : 'rejected'}`);
      }
      assert.ok(valid > 0 && valid < instances.length, 'each case has valid and invalid instances');
    });
  }

  it('number bounds, fractional and exclusive, match ajv exactly for random values', () => {
    const rand = mulberry32(99);
    const pickBound = () => {
      const r = rand();
      if (r < 0.15) return undefined;
      const scale = [1, 10, 100, 0.01][Math.floor(rand() * 4)];
      return Math.round((rand() * 20 - 10) * scale * 1000) / 1000;
    };
    for (let k = 0; k < 40; k++) {
      const schema: Record<string, unknown> = { type: 'number' };
      const lo = pickBound(), hi = pickBound();
      if (lo !== undefined) schema[rand() < 0.5 ? 'minimum' : 'exclusiveMinimum'] = lo;
      if (hi !== undefined) schema[rand() < 0.5 ? 'maximum' : 'exclusiveMaximum'] = hi;
      if (lo === undefined && hi === undefined) continue;
      let c;
      try {
        c = compileConstraint({ jsonSchema: schema }, worldTokenizer());
      } catch (e) {
        // An empty range is refused up front.
        assert.ok(e instanceof ConstraintError && /accepts no value/.test(e.message), String(e));
        continue;
      }
      const values = [lo, hi, 0, -0.5, 0.5].filter((v): v is number => v !== undefined);
      for (let i = 0; i < 30; i++) values.push(Math.round((rand() * 40 - 20) * 10 ** Math.floor(rand() * 4)) / 10 ** Math.floor(rand() * 4));
      for (const v of [...values, ...values.map((x) => x + 0.001), ...values.map((x) => x - 0.001)]) {
        const text = JSON.stringify(v);
        if (/e/.test(text)) continue;
        assert.strictEqual(acceptsText(c, text), ajvAccepts(c, v), `${text} for ${JSON.stringify(schema)}`);
      }
    }
  });

  it('writes object keys in schema order whatever the instance order', () => {
    const schema = { type: 'object', properties: { z: { type: 'integer' }, a: { type: 'integer' } } };
    const { keyRank } = schemaToGrammar(schema as Record<string, unknown>);
    assert.strictEqual(canonicalJson({ a: 1, z: 2, extra: 3 }, keyRank), '{"z":2,"a":1,"extra":3}');
    const c = compileConstraint({ jsonSchema: schema }, worldTokenizer());
    assert.ok(acceptsText(c, '{"z":2,"a":1}'));
    assert.ok(!acceptsText(c, '{"a":1,"z":2}'));
  });

  it('checks the schema with ajv before compiling, naming the problem', () => {
    refusedSchema({ type: 'strin' }, ['invalid JSON schema']);
    refusedSchema({ type: 'object', properties: { a: { type: 'strin' } } }, ['invalid JSON schema', '#/properties/a/type']);
    refusedSchema({ $ref: '#/$defs/missing' }, ['invalid JSON schema']);
  });

  it('refuses keywords a grammar cannot enforce, with the JSON pointer', () => {
    const e = refusedSchema({ type: 'object', properties: { n: { type: 'number', multipleOf: 0.5 } } }, ['multipleOf']);
    assert.strictEqual(e.place, '#/properties/n/multipleOf');
    refusedSchema({ not: { type: 'string' } }, ["'not'"]);
    refusedSchema({ type: 'array', uniqueItems: true }, ['uniqueItems']);
    refusedSchema({ type: 'object', patternProperties: { '^x': { type: 'string' } } }, ['patternProperties']);
    refusedSchema({ oneOf: [{ type: 'integer' }, { type: 'number', minimum: 0 }] }, ['oneOf branches 0 and 1']);
    refusedSchema({ type: 'string', format: 'hostname' }, ["format 'hostname' is not supported"]);
    refusedSchema({ type: 'string', pattern: '(a)\\1' }, ['back-references']);
    refusedSchema({ type: 'string', pattern: 'a', minLength: 2 }, ['minLength/maxLength together with pattern']);
    refusedSchema({ type: 'array', items: { type: 'integer' }, minItems: 1, maxItems: 0 }, ['accepts no value']);
  });

  it('validateOutput returns the parsed JSON or throws a ConstraintError', () => {
    const c = compileConstraint({ jsonSchema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] } }, worldTokenizer());
    assert.deepStrictEqual(c.validateOutput('{"a":5}'), { a: 5 });
    assert.throws(() => c.validateOutput('{"a":"5"}'), /does not conform to the schema: \/a must be integer/);
    assert.throws(() => c.validateOutput('{"a":5'), /not valid JSON/);
  });
});
