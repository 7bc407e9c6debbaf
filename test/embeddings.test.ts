// Embeddings: pooling ('last' token, 'mean' over tokens) and L2 normalisation on the engine, the
// Embed nodes of both hosts, and the n8n embeddings sub-node (LangChain's embedDocuments / embedQuery).
// The engine parts run the bundled model on the real engine (lavapipe in CI); the node parts a fake engine.

import * as assert from 'assert';
import { createEngine } from '../engine/engine-factory';
import type { RwkvEngine } from '../engine/engine';
import { tokenizerFor } from '../engine/engine-factory';
import type { ModelInfo } from '../engine/types';
import { EmbeddingsRwkv } from '../nodes/EmbeddingsRwkv/EmbeddingsRwkv.node';
import { releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import { RwkvEmbeddings } from '../nodes/n8n/rwkv-embeddings';
import { RwkvEmbed } from '../nodes/RwkvEmbed/RwkvEmbed.node';
import { prepareEmbed } from '../nodes/shared/embed-request';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { FakeEngine, FakeEngineProvider } from './nodes-fake-engine';
import { executeContext } from './nodes-n8n-context';

/** A small labelled set: each sentence and its paraphrase. */
const PARAPHRASES: [string, string][] = [
  ['The cat sat on the mat.', 'A cat was sitting on the mat.'],
  ['It is raining heavily today.', 'Today there is heavy rain.'],
  ['The stock market fell sharply.', 'Stock prices dropped sharply.'],
  ['She plays the piano every evening.', 'Every evening she plays piano.'],
  ['The train to London is late.', 'The London train is delayed.'],
  ['He cooked pasta for dinner.', 'For dinner he made pasta.'],
  ['The children are playing football in the park.', 'Kids play football in the park.'],
  ['Water boils at one hundred degrees.', 'At one hundred degrees, water boils.'],
];

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};
const norm = (a: ArrayLike<number>) => Math.sqrt(dot(a, a));
const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => dot(a, b) / (norm(a) * norm(b));

/** Top-1 retrieval hits (the paraphrase is the nearest other text) and the mean cosine of paraphrase vs other pairs. */
function retrieval(vectors: ArrayLike<number>[]) {
  let hits = 0;
  let para = 0;
  let other = 0;
  let others = 0;
  for (let i = 0; i < vectors.length; i++) {
    const partner = i ^ 1;
    let best = -Infinity;
    let nearest = -1;
    for (let k = 0; k < vectors.length; k++) {
      if (k === i) continue;
      const c = cosine(vectors[i], vectors[k]);
      if (c > best) (best = c), (nearest = k);
      if (k !== partner) (other += c), others++;
    }
    if (nearest === partner) hits++;
    para += cosine(vectors[i], vectors[partner]);
  }
  return { hits, paraphrase: para / vectors.length, other: other / others };
}

describe('embeddings on the real engine (bundled model)', function () {
  this.timeout(300000);
  let engine: RwkvEngine;
  before(async () => {
    engine = await createEngine({ precision: 'f32', maxBatch: 8 });
  });
  after(async () => engine?.close());

  it("mean pooling is the average of each token's last-token vector", async () => {
    const text = 'The train to London is late.';
    const tokenizer = tokenizerFor((engine as unknown as { backend: { info: ModelInfo } }).backend.info);
    const ids = tokenizer.encode(text);
    assert.ok(ids.length >= 5, 'a text of several tokens');
    const mean = await engine.embed(text, { pooling: 'mean', layer: 3 });
    // Greedy longest match re-encodes a decoded token prefix to the same tokens.
    const prefixes = await Promise.all(ids.map((_, k) => engine.embed(tokenizer.decode(ids.slice(0, k + 1)), { layer: 3 })));
    const expected = new Float32Array(mean.length);
    for (const v of prefixes) for (let i = 0; i < v.length; i++) expected[i] += v[i] / prefixes.length;
    let worst = 0;
    for (let i = 0; i < mean.length; i++) worst = Math.max(worst, Math.abs(mean[i] - expected[i]));
    assert.ok(worst < 1e-3 * Math.max(1, norm(expected) / Math.sqrt(mean.length)), `worst difference ${worst}`);
    const last = await engine.embed(text, { layer: 3 });
    assert.ok(cosine(mean, last) < 0.999, 'mean pooling differs from the last token');
  });

  it('refuses an unknown pooling', async () => {
    await assert.rejects(engine.embed('x', { pooling: 'max' as never }), /pooling must be "last" or "mean"/);
  });

  it('retrieval: the nearest neighbour of a sentence is its paraphrase far more often than chance', async () => {
    const texts = PARAPHRASES.flat();
    for (const pooling of ['last', 'mean'] as const) {
      const vectors = await Promise.all(texts.map((t) => engine.embed(t, { pooling })));
      const r = retrieval(vectors);
      // Chance is 1 in 15; measured 9/16 (last) and 12/16 (mean) with the bundled model.
      assert.ok(r.hits >= 6, `${pooling}: ${r.hits}/16 nearest neighbours are paraphrases`);
      assert.ok(r.paraphrase > r.other, `${pooling}: paraphrase pairs ${r.paraphrase.toFixed(3)} vs other pairs ${r.other.toFixed(3)}`);
    }
  });
});

describe('embedding options in the nodes (fake engine)', () => {
  let provider: FakeEngineProvider;
  let calls: { text: string; opts: object }[];
  beforeEach(() => {
    process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    calls = [];
    const engine = new FakeEngine();
    const embed = engine.embed.bind(engine);
    engine.embed = async (text, opts = {}) => {
      calls.push({ text, opts: { pooling: opts.pooling } });
      return embed(text, opts);
    };
    provider = new FakeEngineProvider(engine);
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await releaseIdleEngines();
    setEngineProvider(undefined);
    delete process.env.RWKV_FLOW_IDLE_SECONDS;
  });

  it('checks pooling and normalize before anything is queued', () => {
    assert.throws(() => prepareEmbed({ text: 'x', pooling: 'max' }), /pooling: must be one of last, mean, got "max"/);
    assert.throws(() => prepareEmbed({ text: 'x', normalize: 'yes' }), /normalize: must be true or false/);
  });

  it('RWKV Embed passes pooling to the engine and normalises to unit length', async () => {
    const { ctx } = executeContext({ items: [{ json: {} }], params: { text: 'hello world', options: { pooling: 'mean', normalize: true } } });
    const [out] = (await new RwkvEmbed().execute!.call(ctx)) as { json: { embedding: number[] } }[][];
    assert.deepStrictEqual(calls, [{ text: 'hello world', opts: { pooling: 'mean' } }]);
    assert.ok(Math.abs(norm(out[0].json.embedding) - 1) < 1e-6);
  });

  it('the embeddings sub-node supplies embedDocuments / embedQuery with its options', async () => {
    const { ctx } = executeContext({ params: { options: { pooling: 'mean', normalize: true } } });
    const { response } = await new EmbeddingsRwkv().supplyData!.call(ctx as never, 0);
    const embeddings = response as RwkvEmbeddings;
    const docs = await embeddings.embedDocuments(['one', 'two', 'three']);
    assert.strictEqual(docs.length, 3);
    for (const v of docs) assert.ok(Math.abs(norm(v) - 1) < 1e-6);
    const query = await embeddings.embedQuery('two');
    assert.deepStrictEqual(query, docs[1]);
    assert.deepStrictEqual(calls.map((c) => c.opts), Array(4).fill({ pooling: 'mean' }));
    assert.strictEqual(provider.held, 0, 'the engine lease was given back');
    const d = new EmbeddingsRwkv().description;
    assert.deepStrictEqual(d.outputs, ['ai_embedding']);
  });

  it('the embeddings sub-node refuses a bad option when it is supplied', async () => {
    const { ctx } = executeContext({ params: { options: { pooling: 'max' } } });
    await assert.rejects(new EmbeddingsRwkv().supplyData!.call(ctx as never, 0), /pooling: must be one of/);
  });
});
