// The official JSON-Schema-Test-Suite (draft 2020-12) against the schema converter: for every
// schema the converter accepts, each valid instance (as canonical JSON, World-tokenized) must
// be accepted by the grammar and each invalid one rejected. Schemas the converter refuses are
// listed with their message. Prints the pass rate per keyword file.
//
// The suite is not vendored (its data stays out of this repository) and its npm package
// (@json-schema-org/tests) cannot be installed offline, as it pulls the suite from git. Point
// JSON_SCHEMA_TEST_SUITE at a checkout's tests/draft2020-12 folder to run it; without it the
// test is skipped with a message.

import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { canonicalJson, compileConstraint, ConstraintError } from '../engine/grammar';
import { schemaToGrammar } from '../engine/grammar/schema-to-grammar';
import { acceptsText } from './grammar-check-text';
import { worldTokenizer } from './grammar-vocab';
import { REPO_ROOT } from './paths';

interface SuiteGroup {
  description: string;
  schema: object | boolean;
  tests: { description: string; data: unknown; valid: boolean }[];
}

/** Differences the grammar has on purpose, each with the reason; anything else fails the test. */
const KNOWN_GAPS: { why: string; applies(keyword: string, data: unknown, valid: boolean): boolean }[] = [
  {
    why: 'unevaluated* beside anyOf/oneOf counts the evaluations of one matching branch, where the specification counts all (see schema-to-grammar.ts)',
    applies: (keyword, _data, valid) => valid && /^unevaluated/.test(keyword),
  },
  {
    why: 'leap seconds are only accepted when written in UTC (see json-formats.ts)',
    applies: (keyword, data, valid) =>
      valid && /^format:(date-)?time$/.test(keyword) && typeof data === 'string' && /:60(\.\d+)?[+-](?!00(:?00)?$)/.test(data),
  },
];

function ajvAccepts(c: { validateOutput(text: string): unknown }, value: unknown): boolean {
  try {
    c.validateOutput(JSON.stringify(value));
    return true;
  } catch (e) {
    if (!(e instanceof ConstraintError)) throw e;
    return false;
  }
}

function suiteDir(): string | undefined {
  const candidates = [
    process.env.JSON_SCHEMA_TEST_SUITE,
    path.join(REPO_ROOT, 'node_modules', 'json-schema-test-suite', 'tests', 'draft2020-12'),
    path.join(REPO_ROOT, 'node_modules', '@json-schema-org', 'tests', 'tests', 'draft2020-12'),
  ];
  return candidates.find((d) => d && fs.existsSync(path.join(d, 'type.json')));
}

function suiteFiles(dir: string): { keyword: string; file: string }[] {
  const out: { keyword: string; file: string }[] = [];
  for (const f of fs.readdirSync(dir).sort()) {
    // format.json checks that formats are annotations only; the grammar asserts formats (as
    // ajv-formats does), so the assertion tests in optional/format/ are the ones that apply.
    if (f.endsWith('.json') && f !== 'format.json') out.push({ keyword: f.replace(/\.json$/, ''), file: path.join(dir, f) });
  }
  const formats = path.join(dir, 'optional', 'format');
  if (fs.existsSync(formats))
    for (const f of fs.readdirSync(formats).sort())
      if (f.endsWith('.json')) out.push({ keyword: 'format:' + f.replace(/\.json$/, ''), file: path.join(formats, f) });
  return out;
}

describe('official JSON-Schema-Test-Suite, draft 2020-12', function () {
  this.timeout(600000);

  it('the grammar accepts exactly the valid instances of every schema it accepts', function () {
    const dir = suiteDir();
    if (!dir) {
      console.log('      (skipped: set JSON_SCHEMA_TEST_SUITE to the suite\'s tests/draft2020-12 folder)');
      this.skip();
    }
    const rows: string[] = [];
    const refusedList: string[] = [];
    const mismatches: string[] = [];
    const known: string[] = [];
    const followsAjv: string[] = [];
    let totalTests = 0, totalPass = 0;
    for (const { keyword, file } of suiteFiles(dir!)) {
      const groups = JSON.parse(fs.readFileSync(file, 'utf8')) as SuiteGroup[];
      let refused = 0, tests = 0, pass = 0;
      for (const g of groups) {
        const schema = typeof g.schema === 'object' ? { $schema: 'https://json-schema.org/draft/2020-12/schema', ...g.schema } : g.schema;
        let compiled;
        try {
          compiled = compileConstraint({ jsonSchema: schema as object }, worldTokenizer());
        } catch (e) {
          if (!(e instanceof ConstraintError)) throw e;
          refused++;
          refusedList.push(`${keyword} / ${g.description}: ${e.message}`);
          continue;
        }
        const { keyRank } = schemaToGrammar(schema as Record<string, unknown>);
        for (const t of g.tests) {
          tests++;
          const accepted = acceptsText(compiled, canonicalJson(t.data, keyRank));
          const key = `${keyword} / ${g.description} / ${t.description}`;
          if (accepted === t.valid) pass++;
          else if (KNOWN_GAPS.some((g) => g.applies(keyword, t.data, t.valid))) known.push(key);
          // Where ajv (with ajv-formats) itself disagrees with the suite, the grammar follows ajv:
          // ajv is the final check every output must pass.
          else if (accepted === ajvAccepts(compiled, t.data)) followsAjv.push(key);
          else mismatches.push(`${key}: expected ${t.valid ? 'accepted' : 'rejected'} (${canonicalJson(t.data, keyRank)})`);
        }
      }
      totalTests += tests;
      totalPass += pass;
      rows.push(`${keyword.padEnd(28)} groups ${String(groups.length).padStart(3)}  refused ${String(refused).padStart(3)}  instances ${String(pass).padStart(4)}/${String(tests).padEnd(4)} ${tests ? ((100 * pass) / tests).toFixed(1) + '%' : '-'}`);
    }
    console.log(['', 'pass rate per keyword (instances of accepted schemas):', ...rows, `total ${totalPass}/${totalTests}`, '', `known gaps (${known.length}):`, ...known, '', `ajv disagrees with the suite, grammar follows ajv (${followsAjv.length}):`, ...followsAjv, '', `refused schemas (${refusedList.length}):`, ...refusedList].map((l) => '      ' + l).join('\n'));
    assert.deepStrictEqual(mismatches, [], 'grammar verdicts that differ from the suite');
  });
});
