// RWKV-4, RWKV-5.2 and RWKV-6 on the CPU backend beyond the golden logits (test/golden.test.ts, suite [cpu]): the
// results and states are the same bit for bit on 1 and 2 threads, whole or in chunks, alone or batched. The golden
// sequences are too short for the thread pool to split anything (it runs small tasks on one thread), so these
// runs use 512 tokens in one sub-pass: every product, the WKV recurrences (by slot and head, or by slot and
// block of channels) and the per-token kernels are split over both threads.

import { strict as assert } from 'assert';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import type { SlotJob } from '../engine/types';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

const MODELS = ['v4-tiny', 'v5-tiny', 'v6-tiny'];

for (const name of MODELS) {
  describe(`CPU backend on ${name}: the same bits on 1 and 2 threads, whole or in chunks`, function () {
    this.timeout(300_000);
    const model = path.join(GOLDEN, `${name}.pth`);
    before(function () {
      requireGolden(this, model);
    });

    for (const precision of ['f16', 'int8'] as const) {
      it(`${precision} weights: 512 tokens beside two other slots, logits and states`, async () => {
        const tokens = (n: number, seed: number) => Array.from({ length: n }, (_, i) => (i * 131 + seed * 17 + ((i * i) % 7)) % 512);
        const jobs: SlotJob[] = [
          { slot: 0, tokens: tokens(512, 1), output: 'all' },
          { slot: 1, tokens: tokens(40, 2), output: 'last' },
          { slot: 2, tokens: tokens(1, 3), output: 'all' },
        ];
        const runs: { logits: (Float32Array | null)[]; states: Float32Array[] }[] = [];
        for (const opts of [
          { threads: 1, maxTokens: 1024, maxRows: 1024 },
          { threads: 2, maxTokens: 1024, maxRows: 1024 },
          { threads: 2, maxTokens: 7, maxRows: 5 },
        ]) {
          let be: Backend | undefined;
          try {
            be = await createBackend({ model, slots: 3, device: 'cpu', precision, ...opts });
            assert.equal(be.adapterName.match(/(\d+) threads?/)?.[1], String(opts.threads));
            const logits = (await be.run(jobs)) as (Float32Array | null)[];
            runs.push({ logits, states: await Promise.all([0, 1, 2].map((s) => be!.readState(s))) });
          } finally {
            be?.dispose();
          }
        }
        const [one, ...others] = runs;
        assert.ok(one.logits[0]!.every(Number.isFinite), 'logits not finite');
        others.forEach((r, i) => {
          r.logits.forEach((l, j) => assert.deepEqual(l, one.logits[j], `run ${i + 1}, job ${j}: logits differ from 1 thread`));
          r.states.forEach((st, j) => assert.deepEqual(st, one.states[j], `run ${i + 1}, slot ${j}: state differs from 1 thread`));
        });
      });
    }
  });
}
