// choose() scores, with and without calibration, against log-probabilities recomputed in the test from the
// fake model's own logits (FakeBackend.referenceLogits: the tokens fed from the zero state, no engine involved).
// Calibration subtracts each choice's log-probability after end-of-text alone from the zero state (the
// model's prior for the choice), whatever the prompt or initial state.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { ChooseResult } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { byteTokenizer, FakeBackend } from './fake-backend';

const END_OF_TEXT = 0;

/** ln softmax(logits)[row], in float64. */
function logSoftmaxAt(logits: Float32Array, row: number): number {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  return logits[row] - max - Math.log(sum);
}

/** Σ ln p(choice[i] | context, choice[..i]) of the fake model, each prefix fed afresh from the zero state. */
function logProbAfter(fake: FakeBackend, context: number[], choice: number[]): number {
  let total = 0;
  for (let i = 0; i < choice.length; i++) total += logSoftmaxAt(fake.referenceLogits([...context, ...choice.slice(0, i)]), choice[i]);
  return total;
}

/** The ranking choose() should return, from log-probabilities computed here. */
function expectedRanking(fake: FakeBackend, context: number[], choices: string[], calibrate: boolean): ChooseResult['ranking'] {
  return choices
    .map((choice, index) => {
      const rows = byteTokenizer.encode(choice);
      const logProb = logProbAfter(fake, context, rows) - (calibrate ? logProbAfter(fake, [END_OF_TEXT], rows) : 0);
      return { choice, index, perplexity: Math.exp(-logProb / rows.length), logProb, tokens: rows.length };
    })
    .sort((a, b) => a.perplexity - b.perplexity || a.index - b.index);
}

function assertRanking(got: ChooseResult, want: ChooseResult['ranking'], what: string): void {
  assert.deepStrictEqual(got.ranking.map((r) => r.index), want.map((r) => r.index), `${what}: order`);
  got.ranking.forEach((r, i) => {
    const w = want[i];
    assert.strictEqual(r.choice, w.choice, what);
    assert.strictEqual(r.tokens, w.tokens, what);
    assert.ok(Math.abs(r.logProb - w.logProb) < 1e-6, `${what}: "${r.choice}" logProb ${r.logProb}, expected ${w.logProb}`);
    assert.ok(Math.abs(r.perplexity - w.perplexity) <= 1e-6 * w.perplexity, `${what}: "${r.choice}" perplexity ${r.perplexity}, expected ${w.perplexity}`);
  });
}

describe('choose: calibrated and plain scores match log-probabilities recomputed from the logits', () => {
  const prompt = 'Q: pick one. A:';
  const choices = [' yes', ' no', ' maybe so', 'x', ' perhaps'];
  let fake: FakeBackend;
  let engine: RwkvEngine;
  beforeEach(() => {
    fake = new FakeBackend({ slots: 3 });
    engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config: {}, cacheMinTokens: 4, compileConstraint: null });
  });
  afterEach(() => engine.close());

  it('after a prompt: plain scores, and calibrated scores minus the prior after end-of-text', async () => {
    const context = byteTokenizer.encode(prompt);
    const plain = expectedRanking(fake, context, choices, false);
    const calibrated = expectedRanking(fake, context, choices, true);
    // The fixture makes calibration matter: it reorders the choices.
    assert.notDeepStrictEqual(calibrated.map((r) => r.index), plain.map((r) => r.index));
    assertRanking(await engine.choose(prompt, choices), plain, 'plain');
    assertRanking(await engine.choose(prompt, choices, { calibrate: true }), calibrated, 'calibrated');
  });

  it('an empty prompt conditions on end-of-text alone, so calibration leaves every score at 0', async () => {
    assertRanking(await engine.choose('', choices), expectedRanking(fake, [END_OF_TEXT], choices, false), 'plain');
    const calibrated = await engine.choose('', choices, { calibrate: true });
    for (const r of calibrated.ranking) assert.ok(Math.abs(r.logProb) < 1e-9, `"${r.choice}": ${r.logProb}`);
  });

  it('from a saved conversation state: the prior still comes from the zero state', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'choose-calibrate-'));
    // Conversation files live in the engine's state folder.
    const withFolder = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config: { stateDir: dir }, cacheMinTokens: 4, compileConstraint: null });
    try {
      const history = 'User: answer briefly\nBot:';
      await withFolder.saveConversation(history, 'conv.cbor');
      const saved = fs.readFileSync(path.join(dir, 'conv.cbor'));
      await engine.loadState('conv', new Uint8Array(saved));
      const context = byteTokenizer.encode(history);
      assertRanking(await engine.choose('', choices, { state: 'conv', calibrate: true }), expectedRanking(fake, context, choices, true), 'state');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
