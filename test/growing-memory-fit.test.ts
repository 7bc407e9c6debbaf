// A growing state (RWKV-7b) takes its rows as the context fills, so a configuration whose slots cannot all reach
// the context limit in this machine's memory would load and then fail (or be killed) mid-generation. The CPU
// backend refuses it at load instead, naming the numbers and the settings that lower them.

import { strict as assert } from 'assert';
import * as os from 'os';
import * as path from 'path';
import { createBackend } from '../engine/backend';
import { deaRowFloats } from '../engine/rwkv7/dea-sizes';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

const MODEL = path.join(GOLDEN, 'v7b-tiny.pth');

describe('RWKV-7b [cpu]: slots × context limit must fit the machine\'s memory', function () {
  this.timeout(120_000);
  before(function () {
    requireGolden(this, MODEL);
  });

  it('refuses at load a configuration whose slots at the limit pass the memory, and loads one that fits', async () => {
    const maxContext = 1 << 19;
    const perSlot = 4 * maxContext * deaRowFloats({ nLayer: 3, nEmbd: 128 }); // v7b-tiny: 2.4 GB a slot at the limit
    const slots = Math.floor(os.totalmem() / perSlot) + 1;
    await assert.rejects(
      createBackend({ model: MODEL, slots, device: 'cpu', threads: 1, maxContext }),
      (e: Error) => e instanceof RangeError && /slots × a context of 524288 tokens need .* bytes .*more than this machine's memory .*lower maxContext or maxBatch/.test(e.message),
    );
    const be = await createBackend({ model: MODEL, slots: 1, device: 'cpu', threads: 1, maxContext });
    try {
      assert.equal(be.maxStateRows, maxContext);
    } finally {
      be.dispose();
    }
  });
});
