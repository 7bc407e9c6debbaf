// Loading a model yields to the event loop as it goes (house rule: no long blocking): the GPU upload yields before
// every matrix group, the CPU layout before every matrix, and the quantisers every WEIGHTS_PER_YIELD weights, so
// timers and other requests run while a large model loads. Counted as event-loop turns during createBackend.

import { strict as assert } from 'assert';
import { createBackend } from '../engine/backend';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { describeModel } from '../engine/model-spec';
import { planRwkv7Cpu } from '../engine/rwkv7/cpu-weights';
import { Arena } from '../engine/cpu/arena';

/** Event-loop turns (setImmediate callbacks) while `work` runs, and the longest gap between two of them. */
async function turnsDuring(work: () => Promise<unknown>): Promise<{ turns: number; longestMs: number }> {
  let turns = 0;
  let longestMs = 0;
  let last = performance.now();
  let running = true;
  const tick = () => {
    if (!running) return;
    const now = performance.now();
    longestMs = Math.max(longestMs, now - last);
    last = now;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  running = false;
  return { turns, longestMs };
}

describe('loading yields to the event loop', function () {
  this.timeout(300_000);
  const nLayer = 4;
  const ck = randomRwkv7Checkpoint({ nLayer, nEmbd: 256, vocabSize: 1000, dtype: 'f16', seed: 2 });

  it('[gpu] int8, nf4 and f16 uploads: a turn at least for every matrix group (6 or 5 a layer, the embedding, the head)', async () => {
    const gpu: GpuContext = await acquireGpu();
    try {
      // Groups a layer: rkv, lora1, lora2, o, ffn key, ffn value; f16 keeps rkv and lora1 in one buffer (rwkv7/weights.ts
      // projections), quantised layers cannot (f16 LoRAs beside int8/nf4 products).
      for (const [precision, perLayer] of [['int8', 6], ['nf4', 6], ['f16', 5]] as const) {
        const { turns, longestMs } = await turnsDuring(async () => (await createBackend({ model: ck, slots: 1, precision, gpu, device: 'gpu' })).dispose());
        console.log(`      ${precision}: ${turns} turns, longest gap ${longestMs.toFixed(0)} ms`);
        assert.ok(turns >= perLayer * nLayer + 2, `${precision}: ${turns} event-loop turns during the load`);
      }
    } finally {
      releaseGpu(gpu);
    }
  });

  it('CPU int8 layout: a turn at least for every matrix (12 in layer 0, 14 in the others, the head)', async () => {
    // The layout alone: the backend's start then waits for its worker thread, an idle event loop that would
    // count turns whether the layout yields or not.
    const info = describeModel(ck);
    const { turns, longestMs } = await turnsDuring(() => planRwkv7Cpu(new Arena(), ck, info, { precision: 'int8', quantLayers: 0 }));
    console.log(`      cpu int8 layout: ${turns} turns, longest gap ${longestMs.toFixed(0)} ms`);
    assert.ok(turns >= 12 + 14 * (nLayer - 1) + 1, `${turns} event-loop turns during the layout`);
  });
});
