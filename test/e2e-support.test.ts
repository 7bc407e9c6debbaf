// The e2e helpers' own parsing: n8n prints log lines around the JSON of `n8n execute --rawOutput`.

import * as assert from 'assert';
import { rawOutputJson } from './e2e-support';

describe('e2e support: n8n --rawOutput parsing', () => {
  it('cuts the run JSON out between log lines, braces inside strings included', () => {
    const run = { data: { text: 'a } ] " \\ {', items: [{ n: 1 }, [2, { m: '}' }]] } };
    const out = `Loading...\n${JSON.stringify(run, null, 2)}\nThe idle engine was released\n{"later": true}\n`;
    assert.deepStrictEqual(rawOutputJson(out), run);
  });

  it('names what is missing when there is no JSON or it is cut short', () => {
    assert.throws(() => rawOutputJson('Error: no workflow'), /no JSON/);
    assert.throws(() => rawOutputJson('{"a": [1, 2'), /unterminated JSON/);
  });
});
