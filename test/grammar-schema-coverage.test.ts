// The schemas users really have (issue #17): drafts from $schema, vocabulary ignored, boolean
// schemas, no state shared between compilations, recursion through anyOf, finite numbers,
// key order, the keywords added, and flexible whitespace. Each instance's verdict must equal
// ajv's (the final check every output passes).

import * as assert from 'assert';
import { canonicalJson, compileConstraint, ConstraintError } from '../engine/grammar';
import { schemaToGrammar } from '../engine/grammar/schema-to-grammar';
import { acceptsText } from './grammar-check-text';
import { worldTokenizer } from './grammar-vocab';

function ajvAccepts(c: ReturnType<typeof compileConstraint>, value: unknown): boolean {
  try {
    c.validateOutput(JSON.stringify(value));
    return true;
  } catch (e) {
    assert.ok(e instanceof ConstraintError, `not a ConstraintError: ${(e as Error)?.message}`);
    return false;
  }
}

/** Compiles and checks that the grammar's verdict on each instance is ajv's and the expected one. */
function agrees(schema: object | boolean, accepted: unknown[], rejected: unknown[], whitespace?: 'compact' | 'flexible') {
  const c = compileConstraint({ jsonSchema: schema, jsonWhitespace: whitespace }, worldTokenizer());
  const { keyRank } = schemaToGrammar(schema as Record<string, unknown>);
  for (const [list, want] of [[accepted, true], [rejected, false]] as const)
    for (const v of list) {
      const text = canonicalJson(v, keyRank);
      assert.strictEqual(ajvAccepts(c, v), want, `ajv on ${text}`);
      assert.strictEqual(acceptsText(c, text), want, `grammar on ${text}`);
    }
  return c;
}

function refused(schema: object, fragment: string, place?: string) {
  try {
    compileConstraint({ jsonSchema: schema }, worldTokenizer());
  } catch (e) {
    assert.ok(e instanceof ConstraintError, `raw error escaped: ${(e as Error)?.stack}`);
    assert.ok(e.message.includes(fragment), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(fragment)}`);
    if (place !== undefined) assert.strictEqual(e.place, place);
    return;
  }
  assert.fail(`expected a refusal for ${JSON.stringify(schema)}`);
}

describe('JSON schema coverage (issue #17)', function () {
  this.timeout(120000);

  it('reads drafts 04, 06, 07 and 2019-09 from $schema, with their own keyword meanings', () => {
    // draft-04: id, boolean exclusiveMinimum.
    agrees({ $schema: 'http://json-schema.org/draft-04/schema#', id: 'http://x.test/a', type: 'integer', minimum: 3, exclusiveMinimum: true }, [4, 90], [3, 2, 'x']);
    // draft-06/07: items array + additionalItems, dependencies, $ref with siblings (applied, as ajv does).
    agrees({ $schema: 'http://json-schema.org/draft-06/schema#', items: [{ type: 'string' }], additionalItems: { type: 'integer' } }, [['a'], ['a', 1, 2], []], [[1], ['a', 'b']]);
    agrees(
      { $schema: 'http://json-schema.org/draft-07/schema#', definitions: { n: { type: 'integer' } }, $ref: '#/definitions/n', minimum: 3 },
      [5],
      ['x', 1],
    );
    agrees({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', dependencies: { a: ['b'] } }, [{}, { b: 1 }, { a: 1, b: 2 }], [{ a: 1 }]);
    agrees({ $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'array', items: [{ const: 1 }], additionalItems: false }, [[1], []], [[1, 1], [2]]);
  });

  it('ignores annotations and unknown keywords, and takes boolean schemas', () => {
    agrees({ type: 'object', properties: { a: { type: 'string', example: 'x', 'x-order': 2 } }, 'x-vendor': { any: true }, id: 'legacy', required: ['a'] }, [{ a: 'q' }], [{}, { a: 1 }]);
    agrees(true, [1, 'a', null, { x: [1] }], []);
    refused(false as unknown as object, 'accepts no value');
    refused({ type: 'object', properties: { a: { type: 'strin' } } }, 'invalid JSON schema');
  });

  it('keeps no state between compilations: an $id ending in # and a refused schema do not change later verdicts', () => {
    const bad = { $id: 'http://x.test/s#', type: 'object', properties: { a: { $ref: '#/$defs/missing' } }, required: ['a'] };
    const good = { $id: 'http://x.test/s#', type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] };
    for (let round = 0; round < 2; round++) {
      assert.throws(() => compileConstraint({ jsonSchema: { ...bad, title: `r${round}` } }, worldTokenizer()), ConstraintError);
      agrees({ ...good, title: `r${round}` }, [{ a: 1 }], [{ a: 'x' }, {}]);
    }
    // A schema with a nested $schema beside enum, and an enum no type allows: errors are ConstraintErrors.
    agrees({ type: 'object', properties: { x: { $schema: 'http://json-schema.org/draft-07/schema#', enum: ['a', 'b'] } } }, [{ x: 'a' }], [{ x: 'c' }]);
    refused({ type: 'integer', enum: ['a', 'b'] }, 'accepts no value');
  });

  it('makes recursion through a bare $ref in anyOf/oneOf a rule, not an endless inlining', () => {
    const tree = {
      $defs: {
        node: { anyOf: [{ type: 'integer' }, { $ref: '#/$defs/list' }] },
        list: { type: 'array', items: { $ref: '#/$defs/node' } },
      },
      $ref: '#/$defs/node',
    };
    agrees(tree, [1, [1, [2, [3]]], []], ['a', [1, 'a'], [[[null]]]]);
    refused({ $defs: { a: { type: 'object', anyOf: [{ $ref: '#/$defs/a', required: ['x'] }] } }, $ref: '#/$defs/a' }, 'recursive $ref');
  });

  it('writes only finite numbers, integers in exponent form included, and knows int32/int64', () => {
    const num = compileConstraint({ jsonSchema: { type: 'number' } }, worldTokenizer());
    for (const t of ['1e400', '-1e309', '9'.repeat(400)]) assert.strictEqual(acceptsText(num, t), false, t);
    for (const t of ['1e+300', '1.5e-400', '0.25']) assert.strictEqual(acceptsText(num, t), true, t);
    agrees({ type: 'integer' }, [1e21, -2.5e300, 123456789012], [1.5, 'x']);
    agrees({ type: 'integer', format: 'int32' }, [2 ** 31 - 1, -(2 ** 31)], [2 ** 31, -(2 ** 31) - 1]);
    agrees({ type: 'number', format: 'int64' }, [5, 1e21], [0.5]);
    agrees({ type: 'integer', multipleOf: 1 }, [12], [1e21, 0.5]);
  });

  it('writes key orders canonicalJson writes, keys the object does not declare included', () => {
    // "b" is ranked (by the outer object) before "a": canonicalJson puts it first in the inner one too.
    const schema = { type: 'object', properties: { b: { type: 'integer' }, o: { type: 'object', properties: { a: { type: 'integer' } } } } };
    agrees(schema, [{ o: { a: 1, b: 2 } }, { b: 1, o: { c: 3, a: 1, b: [] } }], [{ o: { a: 'x', b: 2 } }]);
  });

  it('supports patternProperties, propertyNames, min/maxProperties, dependentSchemas, unevaluatedProperties and multipleOf', () => {
    agrees({ type: 'object', patternProperties: { '^x-': { type: 'integer' } }, additionalProperties: false }, [{}, { 'x-a': 1 }], [{ 'x-a': 'no' }, { y: 1 }]);
    agrees({ type: 'object', propertyNames: { maxLength: 2 } }, [{ ab: 1 }, {}], [{ abc: 1 }]);
    agrees({ type: 'object', minProperties: 1, maxProperties: 2 }, [{ a: 1 }, { a: 1, b: 2 }], [{}, { a: 1, b: 2, c: 3 }]);
    agrees({ type: 'object', dependentSchemas: { a: { required: ['b'] } } }, [{}, { a: 1, b: 2 }], [{ a: 1 }]);
    agrees({ allOf: [{ properties: { a: { type: 'integer' } } }], unevaluatedProperties: false }, [{ a: 1 }, {}], [{ b: 1 }]);
    agrees({ type: 'integer', multipleOf: 7 }, [0, 14, -21, 700000000], [1, 15, -22]);
    agrees({ type: 'integer', multipleOf: 25, minimum: 10, maximum: 100 }, [25, 100], [0, 125, 30]);
    refused({ type: 'object', properties: { n: { type: 'number', multipleOf: 0.01 } } }, 'multipleOf', '#/properties/n/multipleOf');
    refused({ type: 'object', properties: { n: { if: { type: 'string' } } } }, "'if'", '#/properties/n/if');
  });

  it('allows JSON whitespace between tokens when asked, and none by default', () => {
    const schema = { type: 'object', properties: { a: { type: 'array', items: { type: 'integer' } } } };
    const flexible = compileConstraint({ jsonSchema: schema, jsonWhitespace: 'flexible' }, worldTokenizer());
    const compact = compileConstraint({ jsonSchema: schema }, worldTokenizer());
    const spaced = '{ "a" : [ 1 ,\n 2 ] }';
    assert.strictEqual(acceptsText(flexible, spaced), true);
    assert.strictEqual(acceptsText(compact, spaced), false);
    assert.strictEqual(acceptsText(compact, '{"a":[1,2]}'), true);
  });
});
