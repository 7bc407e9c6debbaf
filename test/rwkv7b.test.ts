// RWKV-7b ("DEA") on both backends (the CPU one, and WebGPU: shaders/rwkv7b_dea_*.wgsl) against the official demo's outputs (../shared/golden/v7b-tiny, README section
// "RWKV-7a and RWKV-7b"), and its growing state everywhere a state goes: slots (read, write, copy, reset), chunked
// and batched calls, the prefix cache (bounded by bytes), conversation files and initial states, and the
// operator's context limit.

import { strict as assert } from 'assert';
import * as path from 'path';
import { execFileSync } from 'child_process';
import { createBackend, type Backend } from '../engine/backend';
import { readSafetensors } from '../engine/loader/safetensors';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { toF32, toI32 } from '../engine/loader/dtype';
import { stateLayout } from '../engine/state-layout';
import { contextRoom, snapshotProblem, snapshotRows } from '../engine/state-shape';
import { PrefixCache } from '../engine/prefix-cache';
import { decodeConversation, encodeConversation, modelSignature } from '../engine/conversation-file';
import { readStateSource, stateSourceBound } from '../engine/state-file';
import { StateFolder } from '../engine/state-folder';
import { InitialStateRegistry } from '../engine/initial-states';
import { prefillLogits } from './prefill-probe';
import { deaRowFloats } from '../engine/rwkv7/dea-sizes';
import { modelVersion } from '../engine/versions';
import { RwkvEngine } from '../engine/engine';
import { RequestError } from '../engine/errors';
import { checkEngineConfig } from '../engine/engine-config';
import { byteTokenizer, FakeBackend } from './fake-backend';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';
import { worstRelL2 } from './metrics';

const MODEL = path.join(GOLDEN, 'v7b-tiny.pth');
const V = 512;

function loadGolden() {
  const g = readSafetensors(path.join(GOLDEN, 'v7b-tiny.golden.st'));
  const tensor = (name: string) => Float32Array.from(toF32(g.tensors.get(name)!));
  return { tokens: Array.from(toI32(g.tensors.get('tokens')!)), logits: tensor('logits'), logitsSeq: tensor('logits_seq'), tensor };
}

/** Runs `tokens` on `slot` in chunks of `chunk`, every row out. */
async function runChunks(be: Backend, slot: number, tokens: number[], chunk: number): Promise<Float32Array> {
  const out = new Float32Array(tokens.length * V);
  for (let at = 0; at < tokens.length; at += chunk) {
    const part = tokens.slice(at, at + chunk);
    const [rows] = await be.run([{ slot, tokens: part, output: 'all' }]);
    out.set(rows!, at * V);
  }
  return out;
}

/** Backends the device-specific suites run on (as golden.test.ts: RWKV_GOLDEN_DEVICES=cpu or gpu for one). */
const DEVICES = (process.env.RWKV_GOLDEN_DEVICES ?? 'gpu,cpu').split(',').map((d) => d.trim()).filter((d): d is 'gpu' | 'cpu' => d === 'gpu' || d === 'cpu');

/** createBackend options that put a model on `device` (the CPU backend on two threads). */
const onDevice = (device: 'gpu' | 'cpu') => (device === 'gpu' ? { device: 'gpu' as const } : { device: 'cpu' as const, threads: 2 });

for (const device of DEVICES) describe(`RWKV-7b (DEA) [${device}]: logits, growing state, context limit`, function () {
  this.timeout(600_000);
  const on = onDevice(device);
  let g: ReturnType<typeof loadGolden>;
  let be: Backend;
  before(async function () {
    requireGolden(this, MODEL, path.join(GOLDEN, 'v7b-tiny.st'), path.join(GOLDEN, 'v7b-tiny.golden.st'));
    g = loadGolden();
    be = await createBackend({ model: MODEL, slots: 3, precision: 'f32', ...on, maxContext: 64 });
  });
  after(() => be?.dispose());

  it(`runs on the ${device === 'gpu' ? 'GPU' : 'CPU'} backend, and its state grows by nLayer·(256+C) floats per token`, async () => {
    assert.equal(be.info.version, 'v7b');
    if (device === 'gpu') assert.doesNotMatch(be.adapterName, /^CPU: /);
    else assert.match(be.adapterName, /^CPU: /);
    assert.equal(be.stateRowFloats, deaRowFloats(be.info));
    assert.equal(be.stateRowFloats, 3 * (256 + 128));
    assert.equal(be.maxStateRows, 64);
    assert.equal(typeof modelVersion({ version: 'v7b' }).gpu, 'function');
  });

  for (const c of [
    { model: 'v7b-tiny.pth', precision: 'f32', tol: 1e-3 },
    { model: 'v7b-tiny.pth', precision: 'f16', tol: 5e-3 },
    { model: 'v7b-tiny.st', precision: 'f16', tol: 5e-3 },
  ] as const) {
    it(`${c.model} ${c.precision}: logits one token at a time and of the whole sequence match the reference (< ${c.tol})`, async () => {
      const b = c.precision === 'f32' && c.model.endsWith('.pth') ? be : await createBackend({ model: path.join(GOLDEN, c.model), slots: 2, precision: c.precision, ...on });
      try {
        b.resetState(0);
        b.resetState(1);
        const step = await runChunks(b, 0, g.tokens, 1);
        const [seq] = await b.run([{ slot: 1, tokens: g.tokens, output: 'all' }]);
        const e1 = worstRelL2(step, g.logits, V);
        const e2 = worstRelL2(seq!, g.logitsSeq, V);
        assert.ok(e1 < c.tol && e2 < c.tol, `rel L2 per step ${e1}, sequence ${e2}`);
      } finally {
        if (b !== be) b.dispose();
      }
    });
  }

  it('chunks of 1, 3, 16 and 128 tokens carrying the state agree with the reference and with one call', async () => {
    be.resetState(2);
    const [whole] = await be.run([{ slot: 2, tokens: g.tokens, output: 'all' }]);
    const one = Float32Array.from(whole!);
    for (const chunk of [1, 3, 16, 128]) {
      be.resetState(0);
      const got = await runChunks(be, 0, g.tokens, chunk);
      assert.ok(worstRelL2(got, g.logitsSeq, V) < 1e-3, `chunk ${chunk} vs reference`);
      assert.ok(worstRelL2(got, one, V) < 1e-5, `chunk ${chunk} vs one call: ${worstRelL2(got, one, V)}`);
    }
  });

  it('in a batch with other slots, and split across sub-passes (maxTokens 5), each slot gets its own logits', async () => {
    const b = await createBackend({ model: MODEL, slots: 3, precision: 'f32', ...on, maxTokens: 5, maxRows: 64 });
    try {
      const other = g.tokens.slice().reverse();
      const third = g.tokens.map((t) => (t * 7 + 3) % V);
      const got = [new Float32Array(24 * V), new Float32Array(24 * V), new Float32Array(24 * V)];
      // Uneven chunks per slot in the same calls, so slots share sub-passes at different cache lengths.
      const sizes = [[7, 7, 10], [3, 13, 8], [11, 1, 12]];
      const at = [0, 0, 0];
      for (let call = 0; call < 3; call++) {
        const jobs = [g.tokens, other, third].map((toks, s) => ({ slot: s, tokens: toks.slice(at[s], at[s] + sizes[s][call]), output: 'all' as const }));
        const res = await b.run(jobs);
        res.forEach((r, s) => got[s].set(r!, at[s] * V));
        for (let s = 0; s < 3; s++) at[s] += sizes[s][call];
      }
      assert.ok(worstRelL2(got[0], g.logitsSeq, V) < 1e-3, `batched slot 0: ${worstRelL2(got[0], g.logitsSeq, V)}`);
      for (const [s, toks] of [[1, other], [2, third]] as const) {
        be.resetState(0);
        const [alone] = await be.run([{ slot: 0, tokens: toks, output: 'all' }]);
        assert.ok(worstRelL2(got[s], alone!, V) < 1e-5, `slot ${s} batched vs alone`);
      }
    } finally {
      b.dispose();
    }
  });

  it('the state after 24 tokens: 24 cached rows, and att_x, att_kv, ffn_x and dea_q equal the reference\'s', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: g.tokens, output: 'none' }]);
    const state = await be.readState(0);
    assert.equal(snapshotRows(be, state.length), 24);
    const layout = stateLayout(be.info);
    for (let l = 0; l < 3; l++) {
      for (const [part, ref] of [['att_x', 'att_x'], ['att_kv', 'att_kv'], ['ffn_x', 'ffn_x'], ['dea_q', 'dea_q_prev']]) {
        const { offset, length } = layout[l][part];
        const want = g.tensor(`state.${l}.${ref}`);
        assert.equal(want.length, length, `${part} length`);
        const err = worstRelL2(state.slice(offset, offset + length), want, length);
        assert.ok(err < 1e-3, `layer ${l} ${part}: ${err}`);
      }
    }
    assert.equal(g.tensor('state.0.dea_k_cache').length, 24 * 32, 'the reference caches 24 rows too');
  });

  it('the cached rows are the K and V the reference\'s kc / vc caches give (after shift and LN), every layer and token', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: g.tokens, output: 'none' }]);
    const state = await be.readState(0);
    const ck = loadCheckpoint(MODEL);
    const w = (name: string) => Float64Array.from(toF32(ck.tensors.get(name)!));
    const C = 128;
    const Q = 256;
    const ln = (a: Float64Array, wt: Float64Array, b: Float64Array) => {
      const mean = a.reduce((x, y) => x + y, 0) / a.length;
      const v = a.reduce((x, y) => x + (y - mean) ** 2, 0) / a.length;
      return a.map((x, i) => ((x - mean) / Math.sqrt(v + 1e-5)) * wt[i] + b[i]);
    };
    const emb = w('emb.weight');
    const [ln0w, ln0b] = [w('blocks.0.ln0.weight'), w('blocks.0.ln0.bias')];
    const e = (tok: number) => ln(emb.slice(tok * C, (tok + 1) * C), ln0w, ln0b);
    assert.deepEqual(Array.from(toI32(readSafetensors(path.join(GOLDEN, 'v7b-tiny.golden.st')).tensors.get('state.dea_tokens')!)), g.tokens);
    const per = be.stateRowFloats!;
    let worst = 0;
    for (let l = 0; l < 3; l++) {
      const q = `blocks.${l}.qkv.`;
      const [k2, v2, kEmb, kx, vEmb, vx] = ['k2', 'v2', 'k_emb.weight', 'k_emb_x.weight', 'v_emb.weight', 'v_emb_x.weight'].map((n) => w(q + n));
      const [xk, xv, lnkW, lnkB, lnvW, lnvB] = ['x_k', 'x_v', 'lnk.weight', 'lnk.bias', 'lnv.weight', 'lnv.bias'].map((n) => w(q + n));
      const kc = g.tensor(`state.${l}.dea_k_cache`);
      const vc = g.tensor(`state.${l}.dea_v_cache`);
      /** k̃_t and ṽ_t from the reference's caches: (kc·k2) ⊙ KE[tok], tanh(vc·v2) ⊙ VE[tok]. */
      const raw = (t: number) => {
        const et = e(g.tokens[t]);
        const kt = new Float64Array(Q);
        const vt = new Float64Array(C);
        for (let i = 0; i < Q; i++) {
          let a = 0;
          for (let m = 0; m < 32; m++) a += kc[t * 32 + m] * k2[m * Q + i];
          let ke = kEmb[g.tokens[t] * Q + i];
          for (let c = 0; c < C; c++) ke += et[c] * kx[i * C + c];
          kt[i] = a * ke;
        }
        for (let i = 0; i < C; i++) {
          let a = 0;
          for (let m = 0; m < 32; m++) a += vc[t * 32 + m] * v2[m * C + i];
          let ve = vEmb[g.tokens[t] * C + i];
          for (let c = 0; c < C; c++) ve += et[c] * vx[i * C + c];
          vt[i] = Math.tanh(a) * ve;
        }
        return { kt, vt };
      };
      let prev = { kt: new Float64Array(Q), vt: new Float64Array(C) };
      for (let t = 0; t < 24; t++) {
        const cur = raw(t);
        const K = ln(cur.kt.map((x, i) => x + (prev.kt[i] - x) * xk[i]), lnkW, lnkB);
        const V = ln(cur.vt.map((x, i) => x + (prev.vt[i] - x) * xv[i]), lnvW, lnvB);
        const at = be.stateSize + t * per + l * (Q + C);
        worst = Math.max(worst, worstRelL2(state.slice(at, at + Q), Float32Array.from(K), Q), worstRelL2(state.slice(at + Q, at + Q + C), Float32Array.from(V), C));
        prev = cur;
      }
    }
    assert.ok(worst < 1e-3, `worst row of the cached K / V against the reference's caches: ${worst}`);
  });

  it('save → load into another slot → continue equals continuing; copyState and resetState carry the rows', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: g.tokens.slice(0, 10), output: 'none' }]);
    const saved = await be.readState(0);
    assert.equal(saved.length, be.stateSize + 10 * be.stateRowFloats!);
    assert.equal(be.stateBytes!(0), saved.byteLength);
    be.writeState(1, saved);
    be.copyState(0, 2);
    const rest = g.tokens.slice(10);
    const [a, b, c] = await be.run([0, 1, 2].map((slot) => ({ slot, tokens: rest, output: 'all' as const })));
    const want = g.logitsSeq.subarray(10 * V);
    for (const [name, got] of [['continued', a], ['loaded', b], ['copied', c]] as const) assert.ok(worstRelL2(got!, want, V) < 1e-3, name);
    assert.ok(worstRelL2(b!, a!, V) < 1e-6, 'loaded = continued');
    // A slot written with a longer state and then reset starts over.
    be.resetState(1);
    const [fresh] = await be.run([{ slot: 1, tokens: g.tokens.slice(0, 2), output: 'all' }]);
    assert.ok(worstRelL2(fresh!, g.logitsSeq.subarray(0, 2 * V), V) < 1e-3);
    assert.equal((await be.readState(1)).length, be.stateSize + 2 * be.stateRowFloats!);
  });

  it('a prefix-cache entry of a 7b prefix gives the same logits as recomputing, and costs its rows in bytes', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: g.tokens.slice(0, 12), output: 'none' }]);
    const short = await be.readState(0);
    await be.run([{ slot: 0, tokens: g.tokens.slice(12, 20), output: 'none' }]);
    const long = await be.readState(0);
    const cache = new PrefixCache(long.byteLength + short.byteLength);
    assert.ok(cache.insert(g.tokens.slice(0, 12), short, null));
    assert.ok(cache.insert(g.tokens.slice(0, 20), long, null));
    assert.equal(cache.bytes, 4 * (2 * be.stateSize + 32 * be.stateRowFloats!));
    const hit = cache.lookup(g.tokens.slice(0, 16))!;
    assert.equal(hit.length, 12);
    be.writeState(2, hit.state);
    const [got] = await be.run([{ slot: 2, tokens: g.tokens.slice(12), output: 'all' }]);
    be.resetState(1);
    const [recomputed] = await be.run([{ slot: 1, tokens: g.tokens, output: 'all' }]);
    assert.ok(worstRelL2(got!, recomputed!.subarray(12 * V), V) < 1e-6);
    // A bound that holds the long entry only: the short one is evicted, a long 7b context costs what it weighs.
    const tight = new PrefixCache(long.byteLength);
    tight.insert(g.tokens.slice(0, 12), short, null);
    tight.insert(g.tokens.slice(0, 20), long, null);
    assert.equal(tight.size, 1);
    assert.equal(tight.peek(g.tokens.slice(0, 16)), 0);
  });

  it('the scheduler resumes a 7b prompt from a cached prefix with the logits of a cold run', async () => {
    const engine = async (cacheMinTokens: number) =>
      new RwkvEngine({
        backend: await createBackend({ model: MODEL, slots: 1, precision: 'f32', ...on }),
        tokenizer: byteTokenizer,
        config: { chunkSize: 16 },
        cacheMinTokens,
        compileConstraint: null,
      });
    const prefilled = prefillLogits;
    const base = g.tokens.slice(0, 14);
    const full = [...base, ...g.tokens.slice(14)];
    const [warm, cold] = [await engine(8), await engine(10_000)];
    try {
      const coldFull = await prefilled(cold, full);
      await prefilled(warm, base); // cached at the end of its prefill
      await prefilled(warm, g.tokens.slice(0, 9).reverse()); // the one slot now holds other tokens
      const hit = await prefilled(warm, full);
      assert.equal(hit.cached, base.length);
      assert.ok(worstRelL2(hit.logits, coldFull.logits, V) < 1e-5, `hit vs cold: ${worstRelL2(hit.logits, coldFull.logits, V)}`);
      assert.ok(worstRelL2(hit.logits, g.logitsSeq.subarray(23 * V), V) < 1e-3);
    } finally {
      await Promise.all([warm.close(), cold.close()]);
    }
  });

  it('the context limit: a call past maxContext, and states with too many rows or a partial row, are refused', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: g.tokens, output: 'none' }]);
    await be.run([{ slot: 0, tokens: g.tokens, output: 'none' }]);
    await assert.rejects(
      be.run([{ slot: 0, tokens: g.tokens, output: 'last' }]),
      /slot 0 would hold 72 tokens of context \(48 cached \+ 24\), more than the context limit of 64 \(maxContext in the engine config\)/,
    );
    // The refused call changed nothing: 16 more tokens still fit.
    await be.run([{ slot: 0, tokens: g.tokens.slice(0, 16), output: 'none' }]);
    const full = await be.readState(0);
    assert.equal(snapshotRows(be, full.length), 64);
    assert.throws(() => be.writeState(1, new Float32Array(be.stateSize + 65 * be.stateRowFloats!)), /state holds 65 cached tokens, more than the context limit of 64/);
    assert.throws(() => be.writeState(1, new Float32Array(be.stateSize + be.stateRowFloats! + 1)), /plus 1152 per cached token/);
    assert.throws(() => contextRoom(be, full, 1), /leaves no room in this model's context limit of 64 tokens/);
    assert.equal(contextRoom(be, null, 60), 4);
    assert.equal(contextRoom({ stateSize: 10 }, null, 1e6), Infinity);
    await assert.rejects(createBackend({ model: MODEL, slots: 1, device: 'cpu', maxContext: 0 }), /maxContext must be an integer in \[1, 1048576\], got 0/);
  });

  it('conversation files carry the rows; a forged row count or a state past the limit is refused before use', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: g.tokens.slice(0, 5), output: 'none' }]);
    const state = await be.readState(0);
    const file = (over: Record<string, unknown>) =>
      encodeConversation({ model: modelSignature(be.info), initialState: '', tokens: Int32Array.from(g.tokens.slice(0, 5)), state, stateRows: 5, logits: new Float32Array(V), ...over });
    const back = await decodeConversation(file({}), 'c.cbor', be.info, be);
    assert.equal(back.stateRows, 5);
    assert.deepEqual(back.state, state);
    await assert.rejects(decodeConversation(file({ stateRows: 1e9 }), 'c.cbor', be.info, be), /stateRows must be an integer in \[0, 64\] \(the context limit\), got 1000000000/);
    await assert.rejects(decodeConversation(file({ stateRows: 4 }), 'c.cbor', be.info, be), /state must be 31872 f32 values \(27264 \+ 4 cached tokens × 1152\)/);
    await assert.rejects(decodeConversation(file({ stateRows: -1 }), 'c.cbor', be.info, be), /stateRows must be/);
    await assert.rejects(decodeConversation(file({ stateRows: 5 }), 'c.cbor', be.info, be.stateSize), /stateRows must be 0 \(this model's state does not grow\)/);
    // The bound grows by the context limit's rows; bytes past it are refused before they are decoded.
    assert.equal(stateSourceBound(be.info, be) - stateSourceBound(be.info, be.stateSize), 4 * 64 * be.stateRowFloats!);
    const huge = new Uint8Array(stateSourceBound(be.info, be) + 1);
    huge[0] = 0xa6;
    await assert.rejects(readStateSource(huge, new StateFolder(undefined), be.info, be), /more than a state of this model can be/);
    const loaded = await readStateSource(file({}), new StateFolder(undefined), be.info, be);
    be.writeState(1, loaded.state);
    const [a] = await be.run([{ slot: 1, tokens: g.tokens.slice(5), output: 'all' }]);
    assert.ok(worstRelL2(a!, g.logitsSeq.subarray(5 * V), V) < 1e-3);
  });

  it('initial states may carry rows within the limit and whole rows only', () => {
    const reg = new InitialStateRegistry(be, 1 << 20);
    const per = be.stateRowFloats!;
    assert.equal(reg.add('five', new Float32Array(be.stateSize + 5 * per), 'test').bytes, 4 * (be.stateSize + 5 * per));
    assert.throws(() => reg.add('partial', new Float32Array(be.stateSize + per / 2), 'test'), /state "partial" has \d+ floats, the model's state has 27264 plus 1152 per cached token/);
    assert.throws(() => reg.add('long', new Float32Array(be.stateSize + 65 * per), 'test'), /holds 65 cached tokens, more than the context limit of 64/);
    assert.equal(snapshotProblem({ stateSize: 4 }, 5), "has 5 floats, the model's state has 4");
  });

  it("the cached rows of all named states together stay within cacheBytes (maxStates alone let a caller pin GiBs)", () => {
    const per = be.stateRowFloats!;
    // Room for 100 rows of cached tokens in all.
    const reg = new InitialStateRegistry(be, 100 * per * 4);
    const rows = (n: number) => new Float32Array(be.stateSize + n * per);
    reg.add('a', rows(60), 'test');
    assert.throws(() => reg.add('b', rows(41), 'test'), (e: Error) => e instanceof RequestError && /cannot load state "b": its 41 cached tokens take .* MiB, and the named states already hold .* MiB of cached tokens; together they may hold .* MiB \(cacheBytes/.test(e.message));
    assert.deepEqual(reg.list().map((s) => s.name), ['a']);
    reg.add('b', rows(40), 'test');
    // Replacing a name frees its own rows first; fixed parts alone are never refused.
    reg.add('a', rows(60), 'test');
    reg.add('c', rows(0), 'test');
    reg.remove('a');
    reg.add('d', rows(60), 'test');
  });
});

if (DEVICES.includes('gpu') && DEVICES.includes('cpu')) describe('RWKV-7b: the GPU and CPU backends hold the same states', function () {
  this.timeout(900_000);
  let g: ReturnType<typeof loadGolden>;
  let gpu: Backend;
  let cpu: Backend;
  before(async function () {
    requireGolden(this, MODEL, path.join(GOLDEN, 'v7b-tiny.golden.st'));
    g = loadGolden();
    gpu = await createBackend({ model: MODEL, slots: 2, precision: 'f32', device: 'gpu', maxContext: 600 });
    cpu = await createBackend({ model: MODEL, slots: 2, precision: 'f32', device: 'cpu', threads: 2, maxContext: 600 });
  });
  after(() => {
    gpu?.dispose();
    cpu?.dispose();
  });

  it('the same tokens give the same snapshot, and a state read on one backend continues on the other', async () => {
    for (const b of [gpu, cpu]) {
      b.resetState(0);
      await b.run([{ slot: 0, tokens: g.tokens.slice(0, 12), output: 'none' }]);
    }
    const [fromGpu, fromCpu] = [await gpu.readState(0), await cpu.readState(0)];
    assert.equal(fromGpu.length, gpu.stateSize + 12 * gpu.stateRowFloats!);
    assert.equal(fromGpu.length, fromCpu.length);
    const fixed = worstRelL2(fromGpu.subarray(0, gpu.stateSize), fromCpu.subarray(0, gpu.stateSize), gpu.stateSize);
    const rows = worstRelL2(fromGpu.subarray(gpu.stateSize), fromCpu.subarray(gpu.stateSize), gpu.stateRowFloats!);
    assert.ok(fixed < 1e-5 && rows < 1e-5, `GPU vs CPU snapshot: fixed part ${fixed}, worst row ${rows}`);
    gpu.writeState(1, fromCpu);
    cpu.writeState(1, fromGpu);
    const rest = g.tokens.slice(12);
    const [gpuOwn, gpuFromCpu] = await gpu.run([0, 1].map((slot) => ({ slot, tokens: rest, output: 'all' as const })));
    const [cpuOwn, cpuFromGpu] = await cpu.run([0, 1].map((slot) => ({ slot, tokens: rest, output: 'all' as const })));
    const want = g.logitsSeq.subarray(12 * V);
    for (const [name, got] of [['GPU', gpuOwn], ['GPU from the CPU state', gpuFromCpu], ['CPU from the GPU state', cpuFromGpu]] as const) {
      assert.ok(worstRelL2(got!, want, V) < 1e-3, `${name} vs reference: ${worstRelL2(got!, want, V)}`);
      assert.ok(worstRelL2(got!, cpuOwn!, V) < 1e-5, `${name} vs the CPU continuing: ${worstRelL2(got!, cpuOwn!, V)}`);
    }
  });

  it('a context of 300 tokens (past one 256-row block of the attention, the cache grown twice from its first 16 rows, decode steps split over ranges of rows) matches the CPU backend', async () => {
    const tokens = Array.from({ length: 300 }, (_, i) => (i * 131 + 7) % V);
    gpu.resetState(0);
    cpu.resetState(0);
    const [cpuAll] = await cpu.run([{ slot: 0, tokens, output: 'all' }]);
    // The GPU in one call of 280 tokens (two sub-passes of the default 256), then one token a call.
    const [head] = await gpu.run([{ slot: 0, tokens: tokens.slice(0, 280), output: 'all' }]);
    const got = new Float32Array(300 * V);
    got.set(head!);
    for (let t = 280; t < 300; t++) got.set((await gpu.run([{ slot: 0, tokens: [tokens[t]], output: 'last' }]))[0]!, t * V);
    const err = worstRelL2(got, cpuAll!, V);
    assert.ok(err < 1e-4, `GPU vs CPU over 300 tokens: worst row ${err}`);
    // The one-token steps ran the split attention (560 rows of cache: three ranges), the 280-token call did not.
    const labels = (tokens: number) => (gpu as unknown as { dispatchLabels(t: number, j: number, r: number): string[] }).dispatchLabels(tokens, 1, 1);
    assert.equal(labels(1).filter((l) => l === 'rwkv7b_dea_combine').length, 3);
    assert.equal(labels(256).filter((l) => l === 'rwkv7b_dea_combine').length, 0);
    assert.equal(gpu.stateBytes!(0), 4 * (gpu.stateSize + 300 * gpu.stateRowFloats!));
    const [a, b] = [await gpu.readState(0), await cpu.readState(0)];
    assert.ok(worstRelL2(a.subarray(gpu.stateSize), b.subarray(gpu.stateSize), gpu.stateRowFloats!) < 1e-4, 'rows after 300 tokens');
    await assert.rejects(gpu.run([{ slot: 0, tokens: [...tokens, 1], output: 'none' }]), /slot 0 would hold 601 tokens of context \(300 cached \+ 301\), more than the context limit of 600/);
    // The refused call changed nothing: exactly the limit still fits.
    await gpu.run([{ slot: 0, tokens, output: 'none' }]);
    assert.equal((await gpu.readState(0)).length, gpu.stateSize + 600 * gpu.stateRowFloats!);
  });

  it('a context limit whose rows cannot fit one GPU buffer is refused with the sizes', async () => {
    await assert.rejects(
      createBackend({ model: MODEL, slots: 8, precision: 'f32', device: 'gpu', maxContext: 1 << 20 }),
      /RWKV-7b: a context of 1048576 tokens in 8 slots needs 12884901888 bytes of cached rows per layer \(1536 per token and layer\), more than this GPU binds in one buffer \(\d+\); lower maxContext in the engine config or use fewer slots/,
    );
  });
});

describe('context limit of a growing state, in the engine (fake backend)', () => {
  /** The fake CPU backend made to look like one whose state grows (only the engine's context check reads these). */
  const growing = () => Object.assign(new FakeBackend({ slots: 2, script: () => 'a'.charCodeAt(0) + 1 }), { stateRowFloats: 4, maxStateRows: 20 });

  it('refuses maxTokens past what the limit leaves after the prompt, naming both; without maxTokens, gets what is left', async () => {
    const engine = new RwkvEngine({ backend: growing(), tokenizer: byteTokenizer, config: {}, compileConstraint: null });
    try {
      assert.throws(() => engine.generate({ prompt: 'hello', maxTokens: 16 }), (e: Error) => e instanceof RequestError && /maxTokens 16 after a prompt of 5 tokens passes this model's context limit: 15 tokens are left/.test(e.message));
      assert.throws(() => engine.generate({ prompt: 'x'.repeat(20) }), /the prompt \(20 tokens\) leaves no room in this model's context limit of 20 tokens/);
      let tokens = 0;
      let reason = '';
      for await (const e of engine.generate({ prompt: 'hello', sampler: { temperature: 0 } })) {
        if (e.type === 'delta') tokens += e.tokens.length;
        if (e.type === 'stop') reason = e.reason;
      }
      assert.equal(tokens, 15);
      assert.equal(reason, 'length');
      // A fixed-size state is not bounded by it.
      const fixed = new RwkvEngine({ backend: new FakeBackend({ slots: 1 }), tokenizer: byteTokenizer, config: {}, compileConstraint: null });
      assert.doesNotThrow(() => fixed.generate({ prompt: 'x'.repeat(30), maxTokens: 100 }));
      await fixed.close();
    } finally {
      await engine.close();
    }
  });

  it('engine config: maxContext must be an integer in [1, 2^20]', () => {
    assert.throws(() => checkEngineConfig({ maxContext: 0 }), /engine config: maxContext must be an integer in \[1, 1048576\], got 0/);
    assert.throws(() => checkEngineConfig({ maxContext: 1.5 }), /maxContext must be an integer/);
    assert.doesNotThrow(() => checkEngineConfig({ maxContext: 8192 }));
  });
});

describe('context limit of a growing state: embed, choose and saved conversations (fake backend)', () => {
  it('refuses texts whose tokens pass the limit before they take a slot', async () => {
    const backend = Object.assign(new FakeBackend({ slots: 2 }), { stateRowFloats: 4, maxStateRows: 8 });
    const engine = new RwkvEngine({ backend, tokenizer: byteTokenizer, config: {}, compileConstraint: null });
    try {
      await assert.rejects(engine.embed('x'.repeat(9)), /the prompt \(9 tokens\) passes this model's context limit of 8 tokens/);
      await assert.rejects(engine.choose('abcdef', ['xy', 'xyz']), /the prompt \(9 tokens\) passes this model's context limit of 8 tokens/);
      await assert.rejects(engine.saveConversation('x'.repeat(9), 'c.cbor'), /passes this model's context limit of 8 tokens/);
      assert.equal(backend.calls.length, 0);
    } finally {
      await engine.close();
    }
  });
});

describe('RWKV-7b [cpu]: a state read keeps an otherwise idle process alive', function () {
  this.timeout(120_000);
  before(function () {
    requireGolden(this, MODEL);
  });

  it('readState resolves in a process with nothing else to do (the compute thread is referenced while it answers)', () => {
    // In-process tests always have mocha's timers alive; a bare child process shows whether the read is awaited.
    const script = `
      const { createBackend } = require(${JSON.stringify(path.resolve(__dirname, '../engine/backend'))});
      (async () => {
        const be = await createBackend({ model: ${JSON.stringify(MODEL)}, slots: 1, device: 'cpu', threads: 1 });
        await be.run([{ slot: 0, tokens: [1, 2, 3], output: 'none' }]);
        const s = await be.readState(0);
        console.log('rows', (s.length - be.stateSize) / be.stateRowFloats);
        be.dispose();
      })();`;
    const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    assert.match(out, /^rows 3$/m);
  });
});

describe('prefix cache and a state that outweighs it (fake backend)', () => {
  it('the scheduler reads a state back for the cache only when stateBytes says it can fit', async () => {
    for (const [bytes, expectReads] of [[1e12, false], [undefined, true]] as const) {
      const fake = new FakeBackend({ slots: 1, script: () => 'a'.charCodeAt(0) + 1 });
      let reads = 0;
      const readState = fake.readState.bind(fake);
      const backend = Object.assign(fake, {
        readState: (slot: number) => (reads++, readState(slot)),
        ...(bytes === undefined ? {} : { stateBytes: () => bytes }),
      });
      const engine = new RwkvEngine({ backend, tokenizer: byteTokenizer, config: { cacheBytes: 1 << 20 }, cacheMinTokens: 4, compileConstraint: null });
      try {
        for await (const e of engine.generate({ prompt: 'hello world, a prompt', maxTokens: 2, sampler: { temperature: 0 } })) void e;
        for (let i = 0; i < 50 && engine.scheduler.active > 0; i++) await new Promise((r) => setTimeout(r, 2));
        assert.equal(reads > 0, expectReads, `stateBytes ${bytes}: ${reads} reads`);
      } finally {
        await engine.close();
      }
    }
  });
});
