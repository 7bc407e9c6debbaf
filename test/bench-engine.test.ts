// The engine section of `npm run bench` (bench/engine.ts) on a tiny shape: every figure it reports is a positive
// number, batch 1 among them as generate() runs it ('top': the row reduced on the GPU), next to full rows.

import * as assert from 'assert';
import { benchEngine, SMOKE_SHAPES } from '../bench/engine';
import { acquireGpu } from '../engine/gpu/device';

describe('bench engine section', function () {
  this.timeout(600000);

  it("reports decode at batch 1 with full rows and with 'top', batches 8 to 64, drawn on the GPU, and prefill, all positive", async () => {
    const gpu = await acquireGpu();
    const r = await benchEngine(gpu, SMOKE_SHAPES, { vocab: 300, seconds: 0.01, log: () => undefined });
    for (const key of ['decodeB1TokPerS', 'decodeB1TopTokPerS', 'decodeB8TopTokPerS', 'decodeB32TopTokPerS', 'decodeB64TopTokPerS', 'prefill512TokPerS', 'decodeB1Draw4TokPerS', 'decodeB64Draw8TokPerS']) {
      const v = r[`tiny.${key}`];
      assert.ok(typeof v === 'number' && v > 0, `tiny.${key} = ${v}`);
    }
  });
});
