// The command line's weight precision: --precision f16|f32|int8|nf4 (and --f32, its older spelling) reaches the
// backend and the server's engine config; bad values and contradictions are refused by name.

import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as path from 'path';
import { cliPrecision } from '../bin/precision-flag';
import { serveEngineConfig } from '../bin/serve';
import { REPO_ROOT } from './paths';

const CLI = path.join(REPO_ROOT, 'bin', 'rwkv-flow');

describe('CLI --precision', function () {
  this.timeout(120_000);

  it('takes the four precisions, --f32 as f32, f16 by default, and names bad values', () => {
    assert.equal(cliPrecision({}), 'f16');
    assert.equal(cliPrecision({ f32: true }), 'f32');
    for (const p of ['f16', 'f32', 'int8', 'nf4']) assert.equal(cliPrecision({ precision: p }), p);
    assert.throws(() => cliPrecision({ precision: 'q4' }), /--precision must be 'f16', 'f32', 'int8' or 'nf4', got 'q4'/);
    assert.throws(() => cliPrecision({ precision: 'int8', f32: true }), /--f32 and --precision int8 disagree/);
  });

  it('serve passes it into the engine config, and leaves it unset without a flag', () => {
    assert.equal(serveEngineConfig({ precision: 'nf4' }).precision, 'nf4');
    assert.equal(serveEngineConfig({}).precision, undefined);
    assert.throws(() => serveEngineConfig({ precision: 'int4' }), /--precision must be/);
  });

  it('logits runs int8 weights on the CPU backend, and nf4 there is refused by name', () => {
    const run = (...args: string[]) => spawnSync('node', [CLI, 'logits', '--tokens', '1,2', '--device', 'cpu', ...args], { encoding: 'utf8' });
    const ok = run('--precision', 'int8');
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal((JSON.parse(ok.stdout) as { logits: number[][] }).logits.length, 2);
    const refused = run('--precision', 'nf4');
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /precision 'nf4' runs on the GPU backend only/);
  });
});
