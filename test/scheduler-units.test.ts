import { PrefillPacer } from '../engine/prefill-pacer';
import * as assert from 'assert';
import { PrefixCache } from '../engine/prefix-cache';
import { StopMatcher } from '../engine/stop-matcher';
import { SlotPool } from '../engine/slot-pool';
import { InitialStateRegistry } from '../engine/initial-states';
import { resolveSamplerOptions, TokenSampler, SeededRandom, AI00_DEFAULTS } from '../engine/samplers';
import { topK } from '../engine/samplers/probability';
import { RepetitionPenalty } from '../engine/samplers/penalties';
import { RequestError } from '../engine/errors';
import { ReferenceMirostat, softmax, typicalCandidates, typicalDraw } from './sampler-reference';

const f32 = (n: number, v = 0) => new Float32Array(n).fill(v);

describe('scheduler units: stop matcher', () => {
  it('holds back text that may start a stop string and never emits part of it', () => {
    const m = new StopMatcher(['\nUser:', 'STOP']);
    let out = '';
    for (const piece of ['Hello', ' there\n', 'Us', 'e']) out += m.push(piece);
    assert.strictEqual(out, 'Hello there');
    out += m.push('r:');
    assert.ok(m.stopped);
    assert.strictEqual(out, 'Hello there');
    assert.strictEqual(m.flush(), '');
  });

  it('releases held text when the stop string does not follow', () => {
    const m = new StopMatcher(['STOP']);
    assert.strictEqual(m.push('abST'), 'ab');
    assert.strictEqual(m.push('x'), 'STx');
    assert.strictEqual(m.push('S'), '');
    assert.strictEqual(m.flush(), 'S');
  });

  it('stops at the earliest of several matches in one push', () => {
    const m = new StopMatcher(['cd', 'b']);
    assert.strictEqual(m.push('abcd'), 'a');
  });
});

describe('scheduler units: prefix cache', () => {
  it('finds the longest cached prefix at token granularity', () => {
    const c = new PrefixCache(1 << 20);
    c.insert([1, 2, 3], f32(4, 3), f32(2, 3));
    c.insert([1, 2, 3, 4, 5], f32(4, 5), f32(2, 5));
    assert.strictEqual(c.lookup([1, 2, 3, 4, 5, 6])!.length, 5);
    assert.strictEqual(c.lookup([1, 2, 3, 4, 9])!.length, 3);
    assert.strictEqual(c.lookup([1, 2, 3, 4, 5], 4)!.length, 3);
    assert.strictEqual(c.lookup([1, 2]), null);
    assert.strictEqual(c.lookup([2, 3, 4]), null);
  });

  it('evicts least recently used entries to stay under its byte bound', () => {
    const entry = 4 * 4 + 2 * 4;
    const c = new PrefixCache(entry * 2);
    c.insert([1], f32(4), f32(2));
    c.insert([2], f32(4), f32(2));
    c.lookup([1, 7]); // touch [1]
    c.insert([3], f32(4), f32(2));
    assert.ok(c.has([1]));
    assert.ok(!c.has([2]));
    assert.ok(c.has([3]));
    assert.strictEqual(c.bytes, entry * 2);
    assert.ok(!c.insert([4], f32(100), f32(2)), 'an entry over the bound is refused');
  });

  it('serves an entry without logits only to prompts that go on beyond it', () => {
    const c = new PrefixCache(1 << 20);
    c.insert([1, 2], f32(4, 1), f32(2, 1));
    c.insert([1, 2, 3], f32(4, 2), null);
    assert.strictEqual(c.lookup([1, 2, 3, 4])!.length, 3);
    assert.strictEqual(c.lookup([1, 2, 3])!.length, 2, 'the prompt ends there: its logits are needed');
    assert.ok(c.has([1, 2, 3]) && !c.has([1, 2, 3], true));
    assert.strictEqual(c.bytes, 4 * 4 * 2 + 2 * 4, 'no logits, no logit bytes');
  });

  it('prunes trie branches of evicted entries', () => {
    const c = new PrefixCache(24);
    c.insert([1, 2, 3, 4], f32(4), f32(2));
    c.insert([5], f32(4), f32(2));
    assert.strictEqual(c.lookup([1, 2, 3, 4]), null);
    assert.strictEqual(c.size, 1);
  });
});

describe('scheduler units: slot choice', () => {
  const reg = new InitialStateRegistry(4, 1000);
  it('continues a slot whose retained tokens prefix the prompt, else takes an empty one, else the LRU', () => {
    const pool = new SlotPool(3);
    const [a, b, c] = pool.slots;
    pool.take(a);
    a.initial = reg.zero;
    a.retained = [1, 2, 3];
    a.lastLogits = f32(2);
    pool.release(a);
    pool.take(b);
    b.initial = reg.zero;
    b.retained = [9];
    pool.release(b);
    assert.deepStrictEqual(pool.choose(reg.zero, [1, 2, 3, 4]), { slot: a, continueLength: 3 });
    assert.strictEqual(pool.choose(reg.zero, [5, 6])!.slot, c);
    pool.take(c);
    c.initial = reg.zero;
    c.retained = [7];
    // No empty slot: least recently used idle (a was released first).
    assert.deepStrictEqual(pool.choose(reg.zero, [5, 6]), { slot: a, continueLength: 0 });
    pool.take(a);
    pool.take(b);
    assert.strictEqual(pool.choose(reg.zero, [5]), null);
  });

  it('does not continue across different initial states or a fully retained prompt without logits', () => {
    const pool = new SlotPool(1);
    const s = pool.slots[0];
    s.initial = reg.zero;
    s.retained = [1, 2];
    s.lastLogits = null;
    assert.strictEqual(pool.choose(reg.zero, [1, 2])!.continueLength, 0);
    assert.strictEqual(pool.choose(reg.zero, [1, 2, 3])!.continueLength, 2);
    const other = { ...reg.zero, name: 'x' };
    assert.strictEqual(pool.choose(other, [1, 2, 3])!.continueLength, 0);
  });
});

describe('scheduler units: samplers', () => {
  const identity = (id: number) => id;
  const sampler = (opts: object, rows = 8) => new TokenSampler(resolveSamplerOptions(opts), rows, identity);

  it('has ai00 defaults', () => {
    const r = resolveSamplerOptions(undefined);
    assert.strictEqual(r.kind, 'nucleus');
    assert.strictEqual(r.topP, AI00_DEFAULTS.topP);
    assert.strictEqual(r.topK, 128);
    assert.strictEqual(r.penaltyDecay, 0.99654026);
  });

  it('rejects bad parameters with a message naming them', () => {
    assert.throws(() => resolveSamplerOptions({ temperature: -1 }), /temperature/);
    assert.throws(() => resolveSamplerOptions({ topP: 0 }), /topP/);
    assert.throws(() => resolveSamplerOptions({ topK: 1.5 }), /topK/);
    assert.throws(() => resolveSamplerOptions({ kind: 'beam' as never }), /kind/);
    assert.throws(() => resolveSamplerOptions({ logitBias: { abc: 1 } as never }), /logitBias/);
    assert.throws(() => resolveSamplerOptions({ seed: -3 }), /seed/);
    assert.throws(() => resolveSamplerOptions({ topp: 0.5 } as never), RequestError);
  });

  it('greedy at temperature 0, with logit bias and mask applied first', () => {
    const logits = Float32Array.from([0, 1, 5, 2, 0, 0, 0, 0]);
    assert.strictEqual(sampler({ temperature: 0, presencePenalty: 0, frequencyPenalty: 0 }).sample(logits), 2);
    assert.strictEqual(sampler({ temperature: 0, logitBias: { 3: 10 } }).sample(logits), 3);
    const allowed = Uint32Array.of(0b11110011); // rows 2 and 3 forbidden
    assert.strictEqual(sampler({ temperature: 0 }).sample(logits, allowed), 1);
    assert.throws(() => sampler({ temperature: 0 }).sample(logits, new Uint32Array(1)), /no token is allowed/);
  });

  it('nucleus keeps only the top_p mass (plus the token crossing it)', () => {
    // probabilities ~ [0.6, 0.3, 0.1, ...]: top_p 0.5 → only token 0; 0.7 → tokens 0, 1
    const logits = Float32Array.from([Math.log(0.6), Math.log(0.3), Math.log(0.1), -50, -50, -50, -50, -50]);
    const seen = (opts: object) => {
      const s = sampler({ presencePenalty: 0, frequencyPenalty: 0, seed: 1, ...opts });
      const set = new Set<number>();
      for (let i = 0; i < 300; i++) set.add(s.sample(logits));
      return [...set].sort();
    };
    assert.deepStrictEqual(seen({ topP: 0.5 }), [0]);
    assert.deepStrictEqual(seen({ topP: 0.7 }), [0, 1]);
    assert.deepStrictEqual(seen({ topP: 1 }), [0, 1, 2]);
    assert.deepStrictEqual(seen({ topP: 1, topK: 2 }), [0, 1]);
  });

  it('repetition penalty discourages repeats', () => {
    const logits = Float32Array.from([1, 0.9, 0, 0, 0, 0, 0, 0]);
    const s = sampler({ temperature: 0, presencePenalty: 0.5, frequencyPenalty: 0.5 });
    assert.strictEqual(s.sample(logits), 0);
    assert.strictEqual(s.sample(logits), 1);
  });

  it('repetition penalties follow ai00 (presence once, frequency on repeats, decay every step)', () => {
    for (const decay of [0.99654026, 0.5, 0]) {
      const p = new RepetitionPenalty(0.3, 0.2, decay);
      const naive = new Map<number, number>();
      let s = 9;
      for (let step = 0; step < 400; step++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        const row = s % 37;
        for (const [k, v] of naive) naive.set(k, v * decay);
        naive.set(row, naive.has(row) ? naive.get(row)! + 0.2 : 0.3);
        p.record(row);
      }
      const got = new Map<number, number>();
      p.forEach((row, penalty) => got.set(row, penalty));
      assert.deepStrictEqual([...got.keys()].sort((a, b) => a - b), [...naive.keys()].sort((a, b) => a - b));
      for (const [k, v] of naive) assert.ok(Math.abs(got.get(k)! - v) < 1e-12, `decay ${decay} row ${k}: ${got.get(k)} vs ${v}`);
    }
  });

  it('typical sampling draws from the locally typical set, as recomputed from the logits', () => {
    // Rows 0 and 1 are the most probable but less typical than the middle ones: a probability-ordered
    // (nucleus) set of the same mass would be different.
    const logits = Float32Array.from([2.6, 2.2, 1.1, 1.0, 0.9, 0.5, 0.2, 0, -0.3, -0.8, -1, -1.5, -2, -2.5, -3, -4]);
    const opts = { topK: 6, tau: 0.6, temperature: 0.7 };
    const expectedSet = typicalCandidates(logits, opts.topK, opts.tau);
    const p = softmax(logits);
    const nucleusSet: number[] = [];
    for (let mass = 0, row = 0; mass <= opts.tau; mass += p[row++]) nucleusSet.push(row);
    assert.notDeepStrictEqual([...expectedSet].sort((a, b) => a - b), nucleusSet, 'the fixture tells typical from nucleus');

    const s = new TokenSampler(resolveSamplerOptions({ kind: 'typical', seed: 11, presencePenalty: 0, frequencyPenalty: 0, ...opts }), logits.length, identity);
    const random = new SeededRandom(11); // the sampler consumes one number of its seeded stream per draw
    const got = Array.from({ length: 300 }, () => s.sample(logits));
    const want = got.map(() => typicalDraw(logits, opts.topK, opts.tau, opts.temperature, random.next()));
    assert.deepStrictEqual(got, want);
    assert.deepStrictEqual([...new Set(got)].sort((a, b) => a - b), [...expectedSet].sort((a, b) => a - b));
  });

  it('mirostat truncates at its moving surprise bound, as recomputed from the logits', () => {
    // A peaked row first (surprises below tau push the bound up to its cap of 4 tau), then a spread one.
    const peaked = Float32Array.from({ length: 64 }, (_, i) => (i === 0 ? 4.5 : -0.08 * i));
    const spread = Float32Array.from({ length: 64 }, (_, i) => -0.12 * i + 0.3 * Math.sin(i * 1.7));
    const rows = [...Array<Float32Array>(150).fill(peaked), ...Array<Float32Array>(300).fill(spread)];
    const tau = 2;
    const eta = 0.3;
    // Default penalties on purpose: mirostat (as in ai00) applies none, so the logits stay as given.
    const s = new TokenSampler(resolveSamplerOptions({ kind: 'mirostat', seed: 5, mirostatTau: tau, mirostatEta: eta }), 64, identity);
    const reference = new ReferenceMirostat(tau, eta);
    const random = new SeededRandom(5); // the sampler consumes one number of its seeded stream per draw
    const got = rows.map((logits) => s.sample(logits));
    const bounds: number[] = [];
    const want = rows.map((logits) => {
      const row = reference.draw(logits, random.next());
      bounds.push(reference.mu);
      return row;
    });
    assert.deepStrictEqual(got, want);
    // The fixture exercises the truncation: the bound reached its cap, moved, and always cut the rows short.
    assert.strictEqual(Math.max(...bounds), 4 * tau);
    const sizes = reference.history.map((c) => c.length);
    assert.ok(Math.min(...sizes) < Math.max(...sizes) && Math.max(...sizes) < 64, `candidate counts ${Math.min(...sizes)}..${Math.max(...sizes)}`);
  });

  it('seeded sampling is reproducible and seeds differ', () => {
    const logits = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i));
    const draw = (seed: number) => {
      const s = new TokenSampler(resolveSamplerOptions({ seed, topP: 1, topK: 0 }), 64, identity);
      return Array.from({ length: 40 }, () => s.sample(logits));
    };
    assert.deepStrictEqual(draw(42), draw(42));
    assert.notDeepStrictEqual(draw(42), draw(43));
    const r = new SeededRandom(5);
    const v = r.next();
    assert.ok(v >= 0 && v < 1);
  });

  it('topK matches a full sort', () => {
    const values = Array.from({ length: 1000 }, (_, i) => Math.sin(i * 7.3));
    const top = Array.from(topK(Float64Array.from(values), values.length, 10));
    const sorted = values.map((v, i) => [v, i]).sort((a, b) => b[0] - a[0]).slice(0, 10).map((p) => p[1]);
    assert.deepStrictEqual(top, sorted);
  });
});

describe('scheduler: prefill pacing', () => {
  const step = (ms: number, chunkTokens = 0, promptWaiting = true, decodeRows = 8) => ({ ms, decodeRows, chunkTokens, promptWaiting });
  /** Drives a pacer as the scheduler does; `cost` gives a step's period from whether it carries a chunk. */
  const simulate = (p: PrefillPacer, steps: number, cost: (chunk: boolean, i: number) => number) => {
    let decodeMs = 0;
    let chunks = 0;
    for (let i = 0; i < steps; i++) {
      const chunk = p.chunkAllowed();
      p.stepPlanned(chunk);
      const ms = cost(chunk, i);
      p.record(step(ms, chunk ? 128 : 0));
      decodeMs += ms;
      chunks += chunk ? 1 : 0;
    }
    return { decodeMs, chunks };
  };

  it('lets the first chunk of a prompt go at once, then makes the decode steps pay it back', () => {
    const p = new PrefillPacer(0.75, 1);
    p.record(step(10, 0, false)); // undisturbed: 10 ms a step
    assert.ok(p.chunkAllowed(), 'no debt yet');
    p.stepPlanned(true);
    assert.ok(p.chunkAllowed(), 'counted when planned, but the account only changes when the step is timed');
    p.record(step(40, 128));
    // Earned 10 / 0.75, paid 40: 26.7 ms in debt; each 10 ms decode step earns 3.3 back.
    assert.ok(Math.abs(p.state.creditMs - (10 / 0.75 - 40)) < 1e-9);
    for (let i = 0; i < 8; i++) {
      assert.ok(!p.chunkAllowed(), `still in debt after ${i} decode steps`);
      p.stepPlanned(false);
      p.record(step(10));
    }
    assert.ok(p.chunkAllowed(), 'paid back after 8 decode steps');
  });

  it('keeps the promised share of decode speed over a prefill, whatever slows the steps', () => {
    const cases: [string, (chunk: boolean, i: number) => number][] = [
      ['chunks 4x a decode step', (c) => (c ? 40 : 10)],
      ['decode steps 15% slower between chunks', (c) => (c ? 40 : 11.5)],
      ['a slow step after each chunk', (() => {
        let after = false;
        return (c: boolean) => {
          const ms = c ? 40 : after ? 14 : 10;
          after = c;
          return ms;
        };
      })()],
      ['a garbage collection every 40 steps', (c, i) => (c ? 40 : 10) + (i % 40 === 0 ? 30 : 0)],
      ['cheap chunks', (c) => (c ? 11 : 10)],
    ];
    for (const keep of [0.5, 0.75, 0.9]) {
      for (const [name, cost] of cases) {
        const p = new PrefillPacer(keep);
        for (let i = 0; i < 15; i++) p.record(step(10, 0, false));
        const steps = 600;
        const { decodeMs, chunks } = simulate(p, steps, cost);
        // Every step decodes once; undisturbed they would have taken 10 ms each.
        const share = (steps * 10) / decodeMs;
        // Out of reach within a chunk every 32 steps (see 'never starves'): then it is at exactly that pace.
        const atGuard = chunks === Math.ceil(steps / 32);
        assert.ok(share >= keep - 0.02 || atGuard, `keep ${keep}, ${name}: decoding kept ${share.toFixed(3)} with ${chunks} chunks`);
        if (keep <= 0.75) assert.ok(!atGuard, `keep ${keep}, ${name}: should be within reach`);
        assert.ok(chunks > 0 && chunks >= steps / 32, `keep ${keep}, ${name}: only ${chunks} chunks`);
        if (name === 'cheap chunks') assert.ok(chunks > steps * 0.6, `keep ${keep}: cheap chunks held back (${chunks})`);
      }
    }
  });

  it('protects the speed of the same batch size, and prices steps it has no reference for once it has one', () => {
    const p = new PrefillPacer(0.75, 1);
    p.record(step(5, 0, false, 1)); // one request decoding alone: 5 ms
    // Eight decode now, no quiet reference for eight: the first chunk goes, then its cost waits for a price.
    assert.ok(p.chunkAllowed());
    p.stepPlanned(true);
    p.record(step(40, 128, true, 8));
    assert.ok(!p.chunkAllowed(), 'unpriced: in debt until a reference exists');
    p.stepPlanned(false);
    p.record(step(10, 0, true, 8)); // decode-only with the prompt waiting stands in as the reference
    assert.strictEqual(p.state.referenceMs, 10, 'not the one-request reference of 5 ms');
    assert.ok(Math.abs(p.state.creditMs - (2 * 10 / 0.75 - 50)) < 1e-9);
  });

  it('is not thrown off by one slow step before the prompt arrives', () => {
    const p = new PrefillPacer(0.75);
    for (let i = 0; i < 20; i++) p.record(step(10, 0, false));
    p.record(step(60, 0, false)); // a garbage collection, say
    p.record(step(40, 128));
    assert.strictEqual(p.state.referenceMs, 10);
  });

  it('starts each prefill with a clean account', () => {
    const p = new PrefillPacer(0.75, 1);
    p.record(step(10, 0, false));
    p.record(step(100, 128));
    assert.ok(!p.chunkAllowed());
    p.record(step(10, 0, false)); // the prompt finished; decoding alone again
    assert.ok(p.chunkAllowed(), 'a new prompt is not charged for the last one');
    assert.strictEqual(p.state.creditMs, 0);
  });

  it('does not pace chunks that cost next to nothing (a backend with no real work)', () => {
    const p = new PrefillPacer(0.9, 1);
    p.record(step(0.02, 0, false));
    const { chunks } = simulate(p, 50, (c) => (c ? 0.4 : 0.02));
    assert.strictEqual(chunks, 50);
  });

  it('never starves a prompt', () => {
    const p = new PrefillPacer(0.9, 1);
    p.record(step(10, 0, false));
    // Decode steps alone are already slower than 0.9 allows: the account never recovers.
    const { chunks } = simulate(p, 320, (c) => (c ? 1000 : 12));
    assert.strictEqual(chunks, 10, 'a chunk every 32 steps');
  });

  it('refuses a share outside (0, 1)', () => {
    assert.throws(() => new PrefillPacer(1), /decodeKeep must be in \(0, 1\)/);
    assert.throws(() => new PrefillPacer(0), /decodeKeep must be in/);
  });
});
