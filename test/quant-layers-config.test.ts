// quantLayers (the first N layers quantised, issue #15) as every configuration path takes it: the engine config
// (checked, keyed), the backend (bounded by the model's layer count, refused with f16/f32, before the model is
// read when the value itself is bad), the CLI flag (info reports the weight bytes) and `serve`.

import { strict as assert } from 'assert';
import { spawnSync } from 'child_process';
import * as path from 'path';
import { checkEngineConfig, engineConfigKey } from '../engine/engine-config';
import { createBackend } from '../engine/backend';
import { checkQuantLayers } from '../engine/precision';
import { cliQuantLayers } from '../bin/precision-flag';
import { serveEngineConfig } from '../bin/serve';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { REPO_ROOT } from './paths';

const CLI = path.join(REPO_ROOT, 'bin', 'rwkv-flow');

describe('quantLayers: configuration', function () {
  this.timeout(120_000);

  it('the engine config takes 0..N with int8 and nf4, names bad values, and keys 0 as unset', () => {
    checkEngineConfig({ precision: 'int8', quantLayers: 4 });
    checkEngineConfig({ precision: 'nf4', quantLayers: 0 });
    checkEngineConfig({ quantLayers: 0 });
    for (const bad of [-1, 1.5, '2', NaN, null]) {
      assert.throws(
        () => checkEngineConfig({ precision: 'int8', quantLayers: bad as never }),
        /^RangeError: engine config: quantLayers \(layers quantised, from the first; 0 = all\) must be an integer >= 0, got /,
        String(bad),
      );
    }
    assert.throws(() => checkEngineConfig({ quantLayers: 2 }), /engine config: quantLayers 2 needs precision 'int8' or 'nf4' .*precision is 'f16'/);
    assert.throws(() => checkEngineConfig({ precision: 'f32', quantLayers: 1 }), /quantLayers 1 needs precision 'int8' or 'nf4'.*precision is 'f32'/);
    assert.equal(engineConfigKey({ precision: 'int8' }), engineConfigKey({ precision: 'int8', quantLayers: 0 }));
    assert.notEqual(engineConfigKey({ precision: 'int8' }), engineConfigKey({ precision: 'int8', quantLayers: 2 }));
  });

  it('the backend bounds it by the model, and refuses a bad value before reading the model', async () => {
    assert.equal(checkQuantLayers(3, 'int8', 3), 3);
    assert.throws(() => checkQuantLayers(4, 'nf4', 3), /quantLayers .* must be an integer in \[0, 3\] \(the model has 3 layers\), got 4/);
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 64, vocabSize: 100, seed: 5 });
    await assert.rejects(createBackend({ model: ck, slots: 1, precision: 'int8', quantLayers: 3, device: 'cpu' }), /must be an integer in \[0, 2\] \(the model has 2 layers\), got 3/);
    await assert.rejects(createBackend({ model: ck, slots: 1, precision: 'f16', quantLayers: 1, device: 'cpu' }), /quantLayers 1 needs precision 'int8' or 'nf4'/);
    // A path that does not exist: the value is refused first.
    await assert.rejects(createBackend({ model: '/nonexistent/model.st', slots: 1, precision: 'int8', quantLayers: -2 }), /quantLayers .* got -2/);
    const be = await createBackend({ model: ck, slots: 1, precision: 'int8', quantLayers: 2, device: 'cpu', threads: 1 });
    be.dispose();
  });

  it('--quant-layers: parsed and checked against --precision; serve leaves the pair to the engine config check', () => {
    assert.equal(cliQuantLayers({}, 'int8'), undefined);
    assert.equal(cliQuantLayers({ 'quant-layers': '12' }, 'nf4'), 12);
    assert.throws(() => cliQuantLayers({ 'quant-layers': 'x' }, 'int8'), /--quant-layers must be an integer >= 0 .*got 'x'/);
    assert.throws(() => cliQuantLayers({ 'quant-layers': '-1' }, 'int8'), /--quant-layers must be an integer >= 0/);
    assert.throws(() => cliQuantLayers({ 'quant-layers': '2' }, 'f16'), /--quant-layers: quantLayers 2 needs precision 'int8' or 'nf4'/);
    assert.equal(serveEngineConfig({ precision: 'int8', 'quant-layers': '6' }).quantLayers, 6);
    assert.equal(serveEngineConfig({ precision: 'nf4' }).quantLayers, undefined);
    assert.throws(() => serveEngineConfig({ 'quant-layers': '6' }), /quantLayers 6 needs precision 'int8' or 'nf4'/);
  });

  it('info reports the precision, the quantised layers and the weight bytes; a layer count beyond the model fails naming both', () => {
    const model = path.join(REPO_ROOT, 'models', 'default.st');
    const info = (...args: string[]) => spawnSync('node', [CLI, 'info', '--model', model, '--device', 'cpu', ...args], { encoding: 'utf8' });
    const all = info('--precision', 'int8');
    assert.equal(all.status, 0, all.stderr);
    const full = JSON.parse(all.stdout) as { nLayer: number; weightBytes: number; quantLayers: number; precision: string };
    const f16 = JSON.parse(info().stdout) as { weightBytes: number };
    const first = info('--precision', 'int8', '--quant-layers', '1');
    assert.equal(first.status, 0, first.stderr);
    const one = JSON.parse(first.stdout) as { weightBytes: number; quantLayers: number; precision: string; adapter: string };
    assert.deepEqual([full.precision, full.quantLayers, one.precision, one.quantLayers], ['int8', 0, 'int8', 1]);
    assert.ok(full.weightBytes < one.weightBytes && one.weightBytes < f16.weightBytes, `${full.weightBytes} < ${one.weightBytes} < ${f16.weightBytes}`);
    assert.match(one.adapter, /int8 in layers 0-0 and the head, f16 in layers 1-/);
    const beyond = info('--precision', 'int8', '--quant-layers', String(full.nLayer + 1));
    assert.notEqual(beyond.status, 0);
    assert.match(beyond.stderr, new RegExp(`must be an integer in \\[0, ${full.nLayer}\\] \\(the model has ${full.nLayer} layers\\), got ${full.nLayer + 1}`));
  });
});
