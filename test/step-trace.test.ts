import * as assert from 'assert';
import { StepTrace } from '../engine/step-trace';
import { byteTokenizer, FakeBackend } from './fake-backend';
import { RwkvEngine } from '../engine/engine';

describe('step trace', () => {
  it('summarises step kinds, per-step spreads and a run-length timeline with wall time', () => {
    const trace = new StepTrace();
    let t = 1000;
    const step = (decodeRows: number, chunkJobs: number, chunkTokens: number, backendMs: number, gapMs = 1) => {
      trace.add({ startedMs: t, backendMs, decodeRows, chunkJobs, chunkTokens });
      t += backendMs + gapMs;
    };
    step(0, 2, 40, 10); // prefill only
    step(1, 0, 0, 2);
    step(1, 3, 24, 5);
    step(2, 2, 16, 5);
    step(3, 0, 0, 3); // 2 and 3 rows share a bucket, so these two join the stretch above only if chunks match
    step(3, 0, 0, 3, 0);
    const s = trace.summary();
    assert.strictEqual(s.steps, 6);
    assert.deepStrictEqual([s.prefillOnlySteps, s.mixedSteps, s.decodeOnlySteps], [1, 2, 3]);
    assert.strictEqual(s.chunkTokens, 80);
    assert.deepStrictEqual(s.chunkTokensPerChunkStep, [16, 24, 40]);
    assert.deepStrictEqual(s.chunksPerChunkStep, [2, 2, 3]);
    assert.deepStrictEqual(s.decodeRowsPerDecodeStep, [1, 2, 3]);
    assert.deepStrictEqual(s.backendMs, { prefillOnly: 10, mixed: 10, decodeOnly: 8 });
    // 28 ms in backend calls and 5 ms between them (the last step's gap is after its end).
    assert.strictEqual(s.wallMs, 33);
    assert.strictEqual(s.betweenStepsMs, 5);
    assert.deepStrictEqual(s.timeline, ['1× prefill +c2/40 (11 ms)', '1× d1 (3 ms)', '1× d1 +c3/24 (6 ms)', '1× d2 +c2/16 (6 ms)', '2× d3 (7 ms)']);
  });

  it('folds a long timeline into its first stretches and one line for the rest', () => {
    const trace = new StepTrace();
    for (let i = 0; i < 100; i++) trace.add({ startedMs: i * 10, backendMs: 5, decodeRows: 1, chunkJobs: i % 2, chunkTokens: (i % 2) * 8 });
    const s = trace.summary();
    assert.strictEqual(s.timeline.length, 40);
    assert.match(s.timeline[39], /^… 61 more stretches: 61 steps \(605 ms\)$/);
  });

  it('is fed by the scheduler: one record per backend call, with its decode rows and chunks', async () => {
    const fake = new FakeBackend({ slots: 2 });
    const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config: { chunkSize: 4, prefillChunkSize: 4 }, compileConstraint: null });
    const trace = new StepTrace();
    const stop = engine.scheduler.onStep((s) => trace.add(s));
    for await (const _ of engine.generate({ prompt: 'abcdefghij', maxTokens: 3, sampler: { temperature: 0 } })) void _;
    stop();
    for await (const _ of engine.generate({ prompt: 'xy', maxTokens: 2, sampler: { temperature: 0 } })) void _;
    const s = trace.summary();
    // 10 prompt tokens in 4-token chunks (4, 4, then the last 2), then 2 tokens decoded after the first sampled one;
    // the second request's steps came after the listener was removed.
    assert.strictEqual(s.steps, 5);
    assert.ok(fake.calls.length > 5);
    assert.strictEqual(s.chunkTokens, 10);
    assert.strictEqual(s.prefillOnlySteps, 3);
    assert.strictEqual(s.decodeOnlySteps, 2);
    await engine.close();
  });
});
