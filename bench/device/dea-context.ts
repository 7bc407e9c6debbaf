// What RWKV-7b's growing state costs in decode speed on this adapter: a random 0.1B-shape model (12 layers, 768
// wide, f16) as RWKV-7a (the same model without the DEA attention) and as RWKV-7b, decode tok/s at batch 1 and 8
// after contexts of 128, 1,024 and 4,000 tokens. 7b's attention reads every cached row of every layer each step.
//   node dist/bench/device/dea-context.js [--seconds 1]

import { createBackend } from '../../engine/backend';
import { acquireGpu } from '../../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../../engine/random-model';

const CONTEXTS = [128, 1024, 4000];

async function main() {
  const i = process.argv.indexOf('--seconds');
  const seconds = i >= 0 ? Number(process.argv[i + 1]) : 1;
  const gpu = await acquireGpu();
  console.log(`adapter: ${gpu.adapterName}; kernel path ${gpu.kernelPath}`);
  const out: Record<string, number> = {};
  for (const variant of ['v7a', 'v7b'] as const) {
    const ck = randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, dtype: 'f16', seed: 7, variant });
    const be = await createBackend({ model: ck, slots: 8, precision: 'f16', gpu, device: 'gpu', maxTokens: 512, maxContext: 4096 });
    let n = 0;
    const tok = () => 1 + ((n++ * 7919) % 65000);
    for (const context of CONTEXTS) {
      for (let s = 0; s < 8; s++) {
        be.resetState(s);
        for (let done = 0; done < context; done += 512) {
          await be.run([{ slot: s, tokens: Array.from({ length: Math.min(512, context - done) }, tok), output: 'none' }]);
        }
      }
      for (const batch of [1, 8]) {
        const step = () => be.run(Array.from({ length: batch }, (_, s) => ({ slot: s, tokens: [tok()], output: 'last' as const })));
        await step();
        let steps = 0;
        const t0 = performance.now();
        // Each step adds a row to the first slots: both batch sizes stop before the limit.
        const most = Math.floor((4096 - context - 4) / 2) - 1;
        while (performance.now() - t0 < seconds * 1000 && steps < most) {
          await step();
          steps++;
        }
        const tps = (steps * batch) / ((performance.now() - t0) / 1000);
        out[`${variant} context ${context} b${batch} tok/s`] = +tps.toFixed(1);
        console.log(`${variant}: context ${context}, batch ${batch}: ${tps.toFixed(1)} tok/s`);
      }
    }
    be.dispose();
  }
  console.log(JSON.stringify(out, null, 1));
}

main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
