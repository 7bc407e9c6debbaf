// RWKV-4, RWKV-5.2 and RWKV-6 on the CPU backend beyond the golden logits (test/golden.test.ts, suite [cpu]):
//  - the CPU and WebGPU passes agree far inside the golden bounds, which the reference's bf16 ln0 sets at 1e-2
//    and more (measured 0.6-1.3e-6 with f32 weights; 0.5-0.8e-6 on random models of 4 heads, C 256/288, F 928);
//  - results and states are the same bit for bit on 1 and 2 threads, whole or in chunks, alone or batched. The
//    golden sequences are too short for the thread pool to split anything (it runs small tasks on one thread),
//    so these runs use 512 tokens in one sub-pass: every product, the WKV recurrences (by slot and head, or by
//    slot and block of channels) and the per-token kernels are split over both threads.

import { strict as assert } from 'assert';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import type { SlotJob } from '../engine/types';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';
import { readSafetensors } from '../engine/loader/safetensors';
import { toI32 } from '../engine/loader/dtype';
import { worstRelL2 } from './metrics';

const MODELS = ['v4-tiny', 'v5-tiny', 'v6-tiny'];

for (const name of MODELS) {
  describe(`CPU backend on ${name}: as the WebGPU pass; the same bits on 1 and 2 threads, whole or in chunks`, function () {
    this.timeout(300_000);
    const model = path.join(GOLDEN, `${name}.pth`);
    const reference = path.join(GOLDEN, `${name}.golden.st`);
    before(function () {
      requireGolden(this, model, reference);
    });

    it('the CPU and WebGPU logits and states agree within 1e-5 (f32 weights)', async () => {
      const tokens = Array.from(toI32(readSafetensors(reference).tensors.get('tokens')!));
      const got: { logits: Float32Array; state: Float32Array }[] = [];
      for (const device of ['cpu', 'gpu'] as const) {
        let be: Backend | undefined;
        try {
          be = await createBackend({ model, slots: 1, device, precision: 'f32', threads: 2 });
          const [logits] = await be.run([{ slot: 0, tokens, output: 'all' }]);
          got.push({ logits: logits!, state: await be.readState(0) });
        } finally {
          be?.dispose();
        }
      }
      const [cpu, gpu] = got;
      const err = worstRelL2(cpu.logits, gpu.logits, cpu.logits.length / tokens.length);
      assert.ok(err < 1e-5, `logits: rel L2 ${err}`);
      const stateErr = worstRelL2(cpu.state, gpu.state, cpu.state.length);
      assert.ok(stateErr < 1e-5, `state: rel L2 ${stateErr}`);
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
