// `npm run bench -- --sections host`: the host's own work per decode step — scheduler, samplers, stop checks and
// text decoding of every request — with the GPU taken out. The backend answers at once with synthetic 'top' results
// (256 candidates of a 65,536-row vocabulary, as the GPU reduction returns them) or, for draw calls, with synthetic
// drawn rows, so what a step costs here is what the CPU adds to every GPU step at that many concurrent requests. On the H200 a 1.5B batch-64 step takes 7.2 ms of
// GPU time (bench/RESULTS.md "Where a step goes"): the figure here says how much a served batch adds to it.

import { RwkvEngine } from '../engine/engine';
import type { DrawJob, InferenceBackend, JobResult, SlotJob, TopLogits } from '../engine/types';
import { WorldTokenizer } from '../engine/tokenizer';
import { FakeBackend } from '../test/fake-backend';

/**
 * The fake CPU backend with a 'top' output that costs nothing: synthetic candidates, best first; and draw calls
 * (runDraws, the scheduler's drawSteps) that answer at once with synthetic rows.
 */
class InstantTopBackend extends FakeBackend {
  readonly topCapacity = 256;
  readonly maxDrawSteps = 16;
  topSteps = 0;

  readonly drawContinuationSteps = 256;

  runDraws(jobs: DrawJob[], steps: number): Promise<Int32Array> {
    return this.drawn(jobs.length, steps);
  }

  continueDraws(uniforms: Float32Array[], steps: number): Promise<Int32Array> {
    return this.drawn(uniforms.length, steps);
  }

  private async drawn(n: number, steps: number): Promise<Int32Array> {
    this.topSteps += steps;
    await new Promise((r) => setImmediate(r));
    const rows = new Int32Array(steps * n);
    let s = (this.topSteps * 977) >>> 0;
    for (let i = 0; i < rows.length; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      rows[i] = ((s >>> 8) % 65000) + 100;
    }
    return rows;
  }

  // FakeBackend's run() is typed for full rows only; a 'top' result goes through the same Promise.
  async run(jobs: SlotJob[]): Promise<(Float32Array | null)[]> {
    if (!jobs.some((j) => j.output === 'top')) return super.run(jobs);
    this.topSteps++;
    await new Promise((r) => setImmediate(r));
    const results = jobs.map((j, k): JobResult => {
      if (j.output !== 'top') return null;
      const rows = new Int32Array(256);
      const logits = new Float32Array(256);
      let s = (this.topSteps * 977 + k * 131) >>> 0;
      for (let i = 0; i < 256; i++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        rows[i] = ((s >>> 8) % 65000) + 100;
        logits[i] = 10 - i * 0.05;
      }
      const top: TopLogits = { kind: 'top', rows, logits, max: 10, logZ: Math.log(40), finite: 65536 };
      return top;
    });
    return results as unknown as (Float32Array | null)[];
  }
}

/** Host ms a decode step and µs a request-step for `requests` concurrent generations of `tokens` tokens. */
export async function hostCost(requests: number, tokens: number, temperature: number, drawSteps = 0): Promise<{ msPerStep: number; usPerRequestStep: number; steps: number }> {
  const backend = new InstantTopBackend({ slots: requests, vocab: 65536 });
  const engine = new RwkvEngine({ backend: backend as unknown as InferenceBackend, tokenizer: WorldTokenizer.bundled(), compileConstraint: null, config: { maxBatch: requests, drawSteps } });
  try {
    // Prompts prefill from full rows in the first steps (the fake backend's own arithmetic): timed from the first
    // 'top' step on, so only decode steps count.
    let t0 = 0;
    let firstTop = 0;
    await Promise.all(
      Array.from({ length: requests }, async (_, i) => {
        const sampler = temperature === 0 ? { temperature: 0 } : { temperature, topP: 0.9, topK: 50 };
        for await (const ev of engine.generate({ prompt: `request ${i} says hello`, maxTokens: tokens, sampler })) {
          if (ev.type === 'delta' && t0 === 0 && backend.topSteps > 0) {
            t0 = performance.now();
            firstTop = backend.topSteps;
          }
        }
      }),
    );
    const steps = backend.topSteps - firstTop;
    const ms = (performance.now() - t0) / Math.max(1, steps);
    return { msPerStep: +ms.toFixed(3), usPerRequestStep: +((1000 * ms) / requests).toFixed(1), steps };
  } finally {
    await engine.close();
  }
}

export async function benchHostCost(log: (s: string) => void = console.log): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  await hostCost(8, 64, 1); // warm-up: the samplers' and scheduler's code compiled before anything is timed
  for (const requests of [1, 8, 64]) {
    for (const [name, temperature] of [['nucleus', 1], ['greedy', 0]] as const) {
      // Every token drawn on the host ('top' steps), then drawn on the GPU in calls of 4 and 8 steps.
      for (const drawSteps of [0, 4, 8]) {
        const r = await hostCost(requests, 128, temperature, drawSteps);
        const how = drawSteps === 0 ? 'drawn on the host' : `drawn on the GPU, ${drawSteps} steps a call`;
        log(`host work a decode step, ${requests} requests, ${name}, ${how}: ${r.msPerStep} ms (${r.usPerRequestStep} µs a request), ${r.steps} steps`);
        out[`${requests}.${name}${drawSteps ? `.draw${drawSteps}` : ''}`] = r;
      }
    }
  }
  return out;
}

export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('host', () => benchHostCost());
}
