// CI's fixed sample of the schema-coverage bench (bench/schema-coverage.ts): a few groups of the
// official JSON-Schema-Test-Suite (MIT, see the fixture's "source"), compiled in the worker and
// checked through the masks. No grammar verdict may accept what ajv rejects, nothing may crash.

import * as assert from 'assert';
import { benchSchemaCoverage } from '../bench/schema-coverage';

describe('schema-coverage sample (bench section, fixed fixture)', function () {
  this.timeout(300000);

  it('compiles the sample without crashes or timeouts, and accepts nothing ajv rejects', async () => {
    const r = (await benchSchemaCoverage()) as Record<string, { compiled: number; crashes: number; timeouts: number; falseAccepts: number; instances: number }>;
    for (const [name, s] of Object.entries(r)) {
      assert.strictEqual(s.crashes, 0, `${name}: crashes`);
      assert.strictEqual(s.timeouts, 0, `${name}: timeouts`);
      assert.strictEqual(s.falseAccepts, 0, `${name}: false accepts`);
      assert.ok(s.compiled > 0 && s.instances > 0, `${name}: something ran`);
    }
  });
});
