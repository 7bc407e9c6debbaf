import { PrefillPacer } from '../engine/prefill-pacer';
import * as assert from 'assert';
import { PrefixCache } from '../engine/prefix-cache';
import { StopMatcher } from '../engine/stop-matcher';
import { SlotPool } from '../engine/slot-pool';
import { InitialStateRegistry } from '../engine/initial-states';
import { resolveSamplerOptions, TokenSampler, SeededRandom, AI00_DEFAULTS } from '../engine/samplers';
import { topIndices } from '../engine/samplers/probability';
import { RepetitionPenalty } from '../engine/samplers/penalties';
import { RequestError } from '../engine/errors';

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
    const allowed = Uint8Array.from([1, 1, 0, 0, 1, 1, 1, 1]);
    assert.strictEqual(sampler({ temperature: 0 }).sample(logits, allowed), 1);
    assert.throws(() => sampler({ temperature: 0 }).sample(logits, new Uint8Array(8)), /no token is allowed/);
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

  it('typical and mirostat draw plausible tokens', () => {
    const logits = Float32Array.from([3, 2.5, 2, 1, -20, -20, -20, -20]);
    for (const kind of ['typical', 'mirostat'] as const) {
      const s = sampler({ kind, seed: 3 });
      for (let i = 0; i < 100; i++) assert.ok(s.sample(logits) < 4, kind);
    }
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

  it('topIndices matches a full sort', () => {
    const values = Array.from({ length: 1000 }, (_, i) => Math.sin(i * 7.3));
    const top = Array.from(topIndices(values.length, 10, (i) => values[i]));
    const sorted = values.map((v, i) => [v, i]).sort((a, b) => b[0] - a[0]).slice(0, 10).map((p) => p[1]);
    assert.deepStrictEqual(top, sorted);
  });
});

describe('scheduler: prefill pacing', () => {
  it('takes a chunk every step until both step costs are known, then paces to keep the decode share', () => {
    const p = new PrefillPacer(0.75, 1);
    assert.strictEqual(p.interval(128), 1);
    assert.ok(p.chunkAllowed(128));
    p.stepPlanned(true);
    p.record(50, 128, true); // a mixed step: 50 ms
    assert.strictEqual(p.interval(128), 2, 'one decode-only step to learn its cost');
    assert.ok(!p.chunkAllowed(128));
    p.stepPlanned(false);
    p.record(25, 0, true); // decode-only: 25 ms, so m = 2
    // k / (k - 1 + 2) >= 0.75  ->  k >= 3
    assert.strictEqual(p.interval(128), 3);
    assert.ok(!p.chunkAllowed(128));
    p.stepPlanned(false);
    assert.ok(p.chunkAllowed(128), 'counted when planned: the step before may not be timed yet');
    p.stepPlanned(true);
    assert.ok(!p.chunkAllowed(128), 'no second chunk right after one, timed or not');
  });

  it('keeps the promised share of decode speed for any cost ratio', () => {
    for (const keep of [0.5, 0.7, 0.75, 0.9]) {
      for (const m of [1, 1.1, 1.5, 2, 3.7, 4.6]) {
        const p = new PrefillPacer(keep, 1);
        p.record(10 * m, 128, true);
        p.record(10, 0, true);
        const k = p.interval(128);
        if (k === 16) continue; // capped so the prompt cannot starve (next test)
        assert.ok(k / (k - 1 + m) >= keep - 1e-9, `keep ${keep}, m ${m}: k ${k} keeps ${k / (k - 1 + m)}`);
        if (k > 1) assert.ok((k - 1) / (k - 2 + m) < keep, `keep ${keep}, m ${m}: k ${k} is not the smallest`);
      }
    }
  });

  it('paces each chunk size by its own cost, and errs toward decoding for sizes not seen yet', () => {
    const p = new PrefillPacer(0.75, 1);
    p.record(10, 0, true);
    p.record(12, 16, true); // a 16-token prompt tail: m = 1.2
    p.record(40, 128, true); // a full chunk: m = 4
    assert.strictEqual(p.interval(16), 1, 'short tails are not held back by the cost of full chunks');
    assert.strictEqual(p.interval(128), 9);
    assert.strictEqual(p.interval(100), 9, 'same size class as 128');
    assert.strictEqual(p.interval(64), 9, 'unseen: priced as the next larger class seen');
    // Unseen and larger than anything seen: the 128-token extra cost (30 ms) doubled, m = 7.
    assert.strictEqual(p.interval(256), 16);
    const q = new PrefillPacer(0.75, 1);
    q.record(10, 0, true);
    q.record(11, 8, true);
    assert.strictEqual(q.interval(32), 2, 'an 8-token chunk adds 1 ms, so a 32-token one is priced at 4 ms: m = 1.4');
  });

  it('protects the speed decoding had before the prompt came, when chunk steps also slow the steps between them', () => {
    const p = new PrefillPacer(0.75, 1);
    p.record(10, 0, false); // undisturbed decode step
    p.record(10, 0, true);
    p.record(40, 128, true);
    assert.strictEqual(p.interval(128), 9, 'no slowdown between chunks: k / (k - 1 + 4) >= 0.75');
    p.record(11.5, 0, true); // decode steps 15% slower while the prompt prefills
    const k = p.interval(128);
    assert.strictEqual(k, 16);
    assert.ok((16 * 10) / (15 * 11.5 + 40) >= 0.75, 'k = 16 keeps the share');
    p.record(13.4, 0, true); // slower than keep allows even without chunks: as rarely as the cap lets
    assert.strictEqual(p.interval(128), 16);
  });

  it('is not thrown off by one slow step before the prompt arrives', () => {
    const p = new PrefillPacer(0.75);
    for (let i = 0; i < 20; i++) p.record(10, 0, false);
    p.record(60, 0, false); // a garbage collection, say
    p.record(10, 0, true);
    p.record(40, 128, true);
    assert.strictEqual(p.interval(128), 9, 'paced as if the slow step had not happened');
  });

  it('never starves a prompt, and does not pace chunks that cost next to nothing', () => {
    const p = new PrefillPacer(0.9, 1);
    p.record(1000, 128, true);
    p.record(10, 0, true);
    assert.strictEqual(p.interval(128), 16);
    const q = new PrefillPacer(0.9, 1);
    q.record(0.5, 128, true);
    q.record(0.01, 0, true);
    assert.strictEqual(q.interval(128), 1);
  });

  it('refuses a share outside (0, 1)', () => {
    assert.throws(() => new PrefillPacer(1), /decodeKeep must be in \(0, 1\)/);
    assert.throws(() => new PrefillPacer(0), /decodeKeep must be in/);
  });
});
