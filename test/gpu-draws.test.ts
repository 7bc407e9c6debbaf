// Decode steps drawn on the GPU (InferenceBackend.runDraws, Scheduler drawSteps): several steps a call, each row's next
// token drawn from its 'top' on the GPU and fed to the next step. Checked against the host doing the same steps one
// call at a time (the same tokens and the same states), then through the engine: the same outputs with and without
// draws, fallbacks where a request needs the host, and a follow-up prompt after a request that ended inside a call.

import * as assert from 'assert';
import * as path from 'path';
import type { GenerateEvent, GenerateRequest, SamplerOptions } from '../engine/api';
import { createBackend, type Backend } from '../engine/backend';
import { RwkvEngine } from '../engine/engine';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import { WorldTokenizer } from '../engine/tokenizer';
import type { DrawJob, TopLogits } from '../engine/types';
import { gpuBackends } from './gpu-backends';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

const MODEL = path.join(GOLDEN, 'v7-tiny.st');
/** The World tokenizer cut to the tiny golden model's 512 rows. */
const tinyTokenizer = () => WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));

/** A sampler over the tiny model's rows (rows are World ids there, as far as bias goes). */
const sampler = (o: SamplerOptions) => new TokenSampler(resolveSamplerOptions(o), 512, (id) => id);

describe('decode steps drawn on the GPU (runDraws)', function () {
  this.timeout(600000);
  const gpus = gpuBackends();
  before(function () {
    requireGolden(this, MODEL);
  });

  const options: SamplerOptions[] = [
    // Greedy with penalties: the penalised rows move the argmax from step to step.
    { temperature: 0, presencePenalty: 2, frequencyPenalty: 1, penaltyDecay: 0.9 },
    // ai00's defaults (penalties 0.3 / 0.3), a bias up and one to -inf.
    { seed: 11, temperature: 1.2, topP: 0.9, topK: 40, logitBias: { 0: -Infinity, 65: 2 } },
    // The whole top, no penalties.
    { seed: 5, temperature: 0.7, topK: 256, topP: 1, presencePenalty: 0, frequencyPenalty: 0 },
    // A narrow nucleus with strong penalties and fast decay.
    { seed: 3, temperature: 2, topP: 0.3, topK: 8, presencePenalty: 1.5, frequencyPenalty: 0.5, penaltyDecay: 0.5 },
  ];
  const prompts = [[10, 20, 30, 40, 50], [7, 8, 9], [100, 200, 300, 400], [33]];

  // RWKV-7 runs its own runtime, 4 / 5 / 6 the shared slot runtime; 7a is RWKV-7's with one more kernel.
  for (const name of ['v7-tiny', 'v7a-tiny', 'v6-tiny', 'v5-tiny', 'v4-tiny']) it(`draws the tokens the host draws from the same tops, and leaves the same states (${name})`, async function () {
    const model = path.join(GOLDEN, `${name}.st`);
    requireGolden(this, model);
    const { gpu } = gpus;
    const [host, dev] = [await createBackend({ model, slots: 4, precision: 'f32', gpu }), await createBackend({ model, slots: 4, precision: 'f32', gpu })].map((b) => gpus.open(b));
    assert.ok((dev.maxDrawSteps ?? 0) >= 8 && dev.runDraws, 'the RWKV-7 GPU runtime draws');
    for (const be of [host, dev]) await be.run(prompts.map((p, slot) => ({ slot, tokens: p.slice(0, -1), output: 'none' as const })));
    const hostSamplers = options.map(sampler);
    const devSamplers = options.map(sampler);
    let hostNext = prompts.map((p) => p[p.length - 1]);
    let devNext = hostNext.slice();
    const drawnByHost: number[][] = options.map(() => []);
    const drawnByGpu: number[][] = options.map(() => []);
    const hostSteps = async (steps: number) => {
      for (let s = 0; s < steps; s++) {
        const tops = (await host.run(hostNext.map((t, slot) => ({ slot, tokens: [t], output: 'top' as const, adjust: hostSamplers[slot].adjustments() })))) as TopLogits[];
        hostNext = tops.map((top, slot) => hostSamplers[slot].sampleTop(top));
        hostNext.forEach((t, slot) => drawnByHost[slot].push(t));
      }
    };
    /** Takes a call's drawn rows as the scheduler does: in order, each told to its sampler. */
    const take = (rows: Int32Array, steps: number) => {
      const n = prompts.length;
      assert.strictEqual(rows.length, steps * n);
      devNext = devNext.map((_, slot) => {
        for (let s = 0; s < steps; s++) {
          devSamplers[slot].recordDrawn(rows[s * n + slot]);
          drawnByGpu[slot].push(rows[s * n + slot]);
        }
        return rows[(steps - 1) * n + slot];
      });
    };
    const uniforms = (steps: number) => devSamplers.map((sm) => sm.takeUniforms(steps));
    // Calls of several lengths, so penalties and streams carry over from call to call.
    for (const steps of [1, 3]) {
      await hostSteps(steps);
      const jobs: DrawJob[] = devNext.map((token, slot) => ({ slot, token, draw: devSamplers[slot].drawParams(256)!, uniforms: devSamplers[slot].takeUniforms(steps) }));
      assert.ok(jobs.every((j) => j.draw), 'every sampler here can be drawn for on the GPU');
      take(await dev.runDraws!(jobs, steps), steps);
      assert.deepStrictEqual(drawnByGpu, drawnByHost, `after a call of ${steps} steps`);
    }
    // Continued calls, each queued before the one it continues is read back: the GPU's penalties and tokens carry on.
    await hostSteps(8 + 5 + 2);
    const first = dev.continueDraws!(uniforms(8), 8);
    const second = dev.continueDraws!(uniforms(5), 5);
    take(await first, 8);
    const third = dev.continueDraws!(uniforms(2), 2);
    take(await second, 5);
    take(await third, 2);
    assert.deepStrictEqual(drawnByGpu, drawnByHost, 'after three continued calls');
    // The draws are not all the top row: the nucleus rows drew others, the greedy one moved under its penalties.
    assert.ok(drawnByGpu.some((t) => new Set(t).size > 3), 'the draws vary');
    assert.ok(new Set(drawnByGpu[0]).size > 1, 'greedy moved under its penalties');
    // Each slot was fed the same tokens: the same state, bit for bit.
    for (let slot = 0; slot < prompts.length; slot++) {
      assert.deepStrictEqual(await dev.readState(slot), await host.readState(slot), `slot ${slot}'s state`);
    }
    // What comes next is the same too: the last drawn tokens fed on both.
    const a = (await host.run(hostNext.map((t, slot) => ({ slot, tokens: [t], output: 'last' as const })))) as Float32Array[];
    const b = (await dev.run(devNext.map((t, slot) => ({ slot, tokens: [t], output: 'last' as const })))) as Float32Array[];
    assert.deepStrictEqual(b, a);
  });

  it("is not offered where the state grows (RWKV-7b's rows re-record its steps)", async function () {
    const model = path.join(GOLDEN, 'v7b-tiny.st');
    requireGolden(this, model);
    const be = gpus.open(await createBackend({ model, slots: 1, precision: 'f32', gpu: gpus.gpu }));
    assert.strictEqual(be.maxDrawSteps, 0);
    await assert.rejects(be.runDraws!([{ slot: 0, token: 5, draw: sampler({ seed: 1 }).drawParams(256)!, uniforms: new Float32Array(1) }], 1), /grows with every token/);
  });

  it('continues only the last draw call, with nothing between, within its room', async () => {
    const dev = gpus.open(await createBackend({ model: MODEL, slots: 2, precision: 'f32', gpu: gpus.gpu }));
    const u = (steps: number) => [new Float32Array(steps).fill(0.5), new Float32Array(steps).fill(0.25)];
    const draw = sampler({ seed: 1 }).drawParams(256)!;
    await assert.rejects(dev.continueDraws!(u(2), 2), /no draw call to continue/);
    await dev.runDraws!([{ slot: 0, token: 5, draw, uniforms: new Float32Array(1) }, { slot: 1, token: 6, draw, uniforms: new Float32Array(1) }], 1);
    await assert.rejects(dev.continueDraws!([new Float32Array(2)], 2), /1 uniforms lists for the last call's 2 jobs/);
    await assert.rejects(dev.continueDraws!(u(2), 17), /steps must be an integer in 1\.\.16/);
    assert.strictEqual((await dev.continueDraws!(u(3), 3)).length, 6);
    dev.resetState(1);
    await assert.rejects(dev.continueDraws!(u(2), 2), /no draw call to continue/);
    // The room a call reserves for its continuations runs out: continueDraws says so, and a new call starts afresh.
    await dev.runDraws!([{ slot: 0, token: 5, draw, uniforms: new Float32Array(1) }, { slot: 1, token: 6, draw, uniforms: new Float32Array(1) }], 1);
    const room = dev.drawContinuationSteps!;
    for (let left = room; left > 0; left -= 16) await dev.continueDraws!(u(Math.min(16, left)), Math.min(16, left));
    await assert.rejects(dev.continueDraws!(u(1), 1), /room for 0 more steps/);
    await assert.rejects(dev.continueDraws!(u(1), 1), /did not start|no draw call to continue/);
    assert.strictEqual((await dev.run([{ slot: 0, tokens: [1], output: 'last' }]))[0]!.length, 512, 'the backend goes on');
  });

  it('refuses a bad call before anything runs, and the backend goes on', async () => {
    const dev = gpus.open(await createBackend({ model: MODEL, slots: 2, precision: 'f32', gpu: gpus.gpu }));
    const job = (o: Partial<DrawJob> = {}): DrawJob => ({ slot: 0, token: 5, draw: sampler({ seed: 1 }).drawParams(256)!, uniforms: new Float32Array(2).fill(0.5), ...o });
    await assert.rejects(dev.runDraws!([job()], 0), /steps must be an integer in 1\.\.16/);
    await assert.rejects(dev.runDraws!([job()], 17), /steps must be an integer in 1\.\.16/);
    await assert.rejects(dev.runDraws!([job({ uniforms: new Float32Array(3) })], 2), /job 0 has 3 uniforms for 2 steps/);
    await assert.rejects(dev.runDraws!([job({ slot: 2 })], 2), /slot 2/);
    await assert.rejects(dev.runDraws!([job({ token: 512 })], 2), /512/);
    await assert.rejects(dev.runDraws!([job(), job()], 2), /slot 0/);
    const rows = await dev.runDraws!([job(), job({ slot: 1 })], 2);
    assert.strictEqual(rows.length, 4);
    assert.ok(Array.from(rows).every((r) => r >= 0 && r < 512));
  });

  describe('through the engine', () => {
    const engines: RwkvEngine[] = [];
    afterEach(async () => {
      await Promise.all(engines.splice(0).map((e) => e.close()));
    });
    const make = async (drawSteps: number, slots = 4) => {
      const backend = gpus.open(await createBackend({ model: MODEL, slots, precision: 'f32', gpu: gpus.gpu }));
      const e = new RwkvEngine({ backend, tokenizer: tinyTokenizer(), config: { chunkSize: 16, drawSteps }, cacheMinTokens: 1000, compileConstraint: null });
      engines.push(e);
      const calls: number[] = [];
      e.scheduler.onStep((s) => calls.push(s.drawSteps ?? 0));
      // Continued calls, and how many were queued before the call they continue had been read back.
      const continued = { calls: 0, early: 0 };
      const cont = backend.continueDraws!.bind(backend);
      let reading = 0;
      const draws = backend.runDraws!.bind(backend);
      const track = (p: Promise<Int32Array>) => {
        reading++;
        return p.finally(() => reading--);
      };
      backend.runDraws = (jobs, steps) => track(draws(jobs, steps));
      backend.continueDraws = (u, steps) => {
        continued.calls++;
        if (reading > 0) continued.early++;
        return track(cont(u, steps));
      };
      return { e, calls, continued };
    };
    const generate = async (e: RwkvEngine, req: GenerateRequest) => {
      const events: GenerateEvent[] = [];
      for await (const ev of e.generate(req)) events.push(ev);
      const stop = events.find((ev) => ev.type === 'stop') as Extract<GenerateEvent, { type: 'stop' }>;
      return { tokens: events.flatMap((ev) => (ev.type === 'delta' ? ev.tokens : [])), text: stop.text, reason: stop.reason };
    };
    const requests: GenerateRequest[] = [
      { prompt: 'The quick brown fox', maxTokens: 23, sampler: { temperature: 0, logitBias: { 0: -Infinity } } },
      { prompt: 'Once upon a time', maxTokens: 30, sampler: { seed: 11, temperature: 1.2, topP: 0.9, topK: 40, logitBias: { 0: -Infinity } } },
      { prompt: 'Hello', maxTokens: 17, sampler: { seed: 4 } },
      { prompt: 'A list:', maxTokens: 40, stop: ['R'], sampler: { seed: 9, temperature: 1, logitBias: { 0: -Infinity } } },
    ];

    it('gives the same outputs with draws as without, for requests run together and alone', async () => {
      const [drawn, plain] = [await make(4), await make(0)];
      const together = async (e: RwkvEngine) => Promise.all(requests.map((r) => generate(e, r)));
      const a = await together(drawn.e);
      const b = await together(plain.e);
      assert.deepStrictEqual(a, b);
      assert.strictEqual(a[0].tokens.length, 23);
      assert.strictEqual(a[3].reason, 'stop');
      assert.ok(drawn.calls.some((n) => n === 4), 'draw calls of 4 steps ran');
      assert.ok(drawn.continued.early > 0, 'calls were queued behind calls not yet read back');
      assert.ok(drawn.calls.some((n) => n > 0 && n < 4), 'a call shortened to what a request may still take');
      assert.ok(plain.calls.every((n) => n === 0), 'drawSteps 0 draws nothing on the GPU');
      for (const r of requests) assert.deepStrictEqual(await generate(drawn.e, r), await generate(plain.e, r));
    });

    it('draws on the host while any running request needs it (log-probabilities, mirostat)', async () => {
      const drawn = await make(8);
      const plain = requests[1];
      const [withLogprobs] = await Promise.all([
        generate(drawn.e, { prompt: 'Logprobs', maxTokens: 12, topLogprobs: 2, sampler: { seed: 1 } }),
        generate(drawn.e, { ...plain, maxTokens: 12 }),
      ]);
      assert.strictEqual(withLogprobs.tokens.length, 12);
      assert.strictEqual(drawn.calls.filter((n) => n > 0).length, 0, 'no draw call beside a request with log-probabilities');
      await Promise.all([generate(drawn.e, { prompt: 'Mirostat', maxTokens: 10, sampler: { kind: 'mirostat', seed: 2 } }), generate(drawn.e, { ...plain, maxTokens: 10 })]);
      assert.strictEqual(drawn.calls.filter((n) => n > 0).length, 0, 'no draw call beside a mirostat request');
      await generate(drawn.e, plain);
      assert.ok(drawn.calls.some((n) => n === 8), 'alone, the plain request is drawn on the GPU');
    });

    it('40 requests on 8 slots, queued, mixed with host-drawn ones and cancelled ones: nothing lost, the same outputs', async () => {
      const [drawn, plain] = [await make(8, 8), await make(0, 8)];
      const many = (e: RwkvEngine) =>
        Promise.all(
          Array.from({ length: 40 }, async (_, i) => {
            const req: GenerateRequest = {
              prompt: `Item ${i}:`,
              maxTokens: 1 + ((i * 7) % 25),
              ...(i % 5 === 0 ? { stop: ['R'] } : {}),
              ...(i % 7 === 3 ? { topLogprobs: 1 } : {}),
              sampler: i % 3 === 0 ? { temperature: 0, logitBias: { 0: -Infinity } } : { seed: i, temperature: 1, topP: 0.9, topK: 40 },
            };
            // Every ninth is cancelled after its third token: it ends with 'abort' wherever the call stood.
            const ac = new AbortController();
            const events: GenerateEvent[] = [];
            let deltas = 0;
            for await (const ev of e.generate(req, { signal: ac.signal })) {
              events.push(ev);
              if (ev.type === 'delta' && ++deltas === 3 && i % 9 === 4) ac.abort();
            }
            const stop = events[events.length - 1];
            assert.strictEqual(stop.type, 'stop', `request ${i} ended with a stop event`);
            const tokens = events.flatMap((ev) => (ev.type === 'delta' ? ev.tokens : []));
            // A cancelled request's tokens depend on where the call stood: only its first three are compared.
            return i % 9 === 4 ? { aborted: (stop as { reason: string }).reason, first: tokens.slice(0, 3) } : { tokens, text: (stop as { text: string }).text, reason: (stop as { reason: string }).reason };
          }),
        );
      const a = await many(drawn.e);
      const b = await many(plain.e);
      assert.deepStrictEqual(a, b);
      assert.ok(drawn.calls.some((n) => n > 1), 'draw calls ran');
      for (const { e } of [drawn, plain]) assert.strictEqual(e.scheduler.active + e.scheduler.queued, 0);
    });

    for (const queuedBehind of [false, true])
      it(`a request that ended inside a call leaves its slot holding what it was fed${queuedBehind ? ', or cleared where a call queued behind fed it on' : ''}`, async () => {
        const [drawn, plain] = [await make(8, 1), await make(0, 1)];
        const backend = (drawn.e as unknown as { backend: Backend }).backend;
        // Without continueDraws every call is read back before the next: the slot's last call is its own.
        if (!queuedBehind) Object.defineProperty(backend, 'continueDraws', { value: undefined });
        const first: GenerateRequest = { prompt: 'Story:', maxTokens: 40, stop: ['U'], sampler: { temperature: 0, logitBias: { 0: -Infinity } } };
        const one = await generate(drawn.e, first);
        assert.deepStrictEqual(one, await generate(plain.e, first));
        assert.strictEqual(one.reason, 'stop');
        // Its first token came from the prompt's logits; the draw calls ran on past the token that stopped it.
        const steps = drawn.calls.reduce((n, c) => n + c, 0);
        assert.ok(steps > one.tokens.length, `the request ended inside a draw call (${steps} steps for ${one.tokens.length} tokens)`);
        assert.strictEqual(drawn.continued.early > 0, queuedBehind);
        const slot = drawn.e.scheduler.pool.slots[0];
        if (queuedBehind) {
          // The call behind fed the slot on: nothing may resume from it.
          assert.deepStrictEqual([slot.retained.length, slot.initial], [0, null]);
        } else {
          // The slot retains the prompt and every token fed, past the stop: fed again from the zero state, they give its state.
          assert.strictEqual(slot.retained.length, tinyTokenizer().encode('Story:').length + steps);
          const check = gpus.open(await createBackend({ model: MODEL, slots: 1, precision: 'f32', gpu: gpus.gpu }));
          await check.run([{ slot: 0, tokens: slot.retained.slice(), output: 'none' }]);
          const [got, want] = [await backend.readState(0), await check.readState(0)];
          let worst = 0;
          for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
          // Fed as one prefill rather than step by step: the same tokens, summed in another order.
          assert.ok(worst < 1e-4, `state differs by ${worst}`);
        }
        // A follow-up runs as it does without draws.
        const next: GenerateRequest = { prompt: `Story:${one.text} and then`, maxTokens: 12, sampler: { temperature: 0, logitBias: { 0: -Infinity } } };
        assert.deepStrictEqual(await generate(drawn.e, next), await generate(plain.e, next));
      });
  });
});
