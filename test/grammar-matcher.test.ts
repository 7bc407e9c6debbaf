import * as assert from 'assert';
import { compileConstraint, ConstraintError } from '../engine/grammar';
import { mulberry32 } from './grammar-sampler';
import { worldTokenizer } from './grammar-vocab';

const tok = () => worldTokenizer();

function bits(mask: Uint32Array): number[] {
  const out: number[] = [];
  for (let w = 0; w < mask.length; w++) for (let b = 0; b < 32; b++) if ((mask[w] >>> b) & 1) out.push(w * 32 + b);
  return out;
}

function isValidUtf8(b: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
}

describe('constraint matcher over the World vocabulary', function () {
  this.timeout(120000);

  it('the mask agrees with accept() on every token of the vocabulary', () => {
    const c = compileConstraint({ jsonSchema: { type: 'object', properties: { a: { type: 'string' }, n: { type: 'integer' } } } }, tok());
    for (const prefix of ['', '{"a":"x', '{"a":"é","n":-1', '{"n":12']) {
      const ids = tok().encode(prefix);
      const m = c.newMatcher();
      ids.forEach((id) => m.accept(id));
      const mask = new Uint32Array(2048);
      m.fillMask(mask);
      const allowed = new Set(bits(mask));
      // Every token: replay the prefix in a fresh matcher and try it.
      let checked = 0;
      for (let id = 1; id < tok().vocabSize; id += 1) {
        if (!tok().tokenBytes(id)) {
          assert.ok(!allowed.has(id), `unused id ${id} must not be allowed`);
          continue;
        }
        // Trying every id is slow with a fresh matcher each; sample 1 in 16 plus all allowed.
        if (id % 16 !== 0 && !allowed.has(id)) continue;
        const probe = c.newMatcher();
        ids.forEach((t) => probe.accept(t));
        let ok = true;
        try {
          probe.accept(id);
        } catch (e) {
          assert.ok(e instanceof ConstraintError);
          ok = false;
        }
        assert.strictEqual(ok, allowed.has(id), `token ${id} ${JSON.stringify(tok().decode([id]))} after ${JSON.stringify(prefix)}`);
        checked++;
      }
      assert.ok(checked > 4000);
    }
  });

  it('allows end of text exactly when the grammar accepts', () => {
    const c = compileConstraint({ grammar: 'root ::= "ab" ("c" "d"?)?' }, tok());
    const m = c.newMatcher();
    const mask = new Uint32Array(2048);
    const expect: [string, boolean][] = [['a', false], ['b', true], ['c', true], ['d', true]];
    m.fillMask(mask);
    assert.strictEqual(mask[0] & 1, 0);
    for (const [ch, accepting] of expect) {
      m.accept(tok().encode(ch)[0]);
      m.fillMask(mask);
      assert.strictEqual(mask[0] & 1, accepting ? 1 : 0, `after ${ch}`);
      assert.strictEqual(m.isAccepting(), accepting);
    }
    assert.ok(m.isDone(), 'after "abcd" only the end of text can follow');
    assert.deepStrictEqual(bits(mask), [0]);
    m.accept(0);
    assert.throws(() => m.accept(tok().encode('a')[0]), ConstraintError);
  });

  it('refuses end of text before the grammar is complete', () => {
    const m = compileConstraint({ grammar: 'root ::= "ab"' }, tok()).newMatcher();
    m.accept(tok().encode('a')[0]);
    assert.throws(() => m.accept(0), /end of text is not allowed/);
  });

  it('allows tokens that are not valid UTF-8 on their own, and only valid continuations', () => {
    const c = compileConstraint({ jsonSchema: { type: 'string' } }, tok());
    const m = c.newMatcher();
    m.accept(tok().encode('"')[0]);
    const mask = new Uint32Array(2048);
    m.fillMask(mask);
    const allowed = new Set(bits(mask));
    let partial = -1;
    for (let id = 1; id < tok().vocabSize; id++) {
      const b = tok().tokenBytes(id);
      if (b && !isValidUtf8(b) && b[0] >= 0xe0 && b[0] < 0xf0 && b.length === 1) {
        partial = id;
        break;
      }
    }
    assert.ok(partial > 0, 'the World vocabulary has single-byte lead tokens');
    assert.ok(allowed.has(partial), 'a UTF-8 lead byte is allowed inside a string');
    m.accept(partial);
    m.fillMask(mask);
    const after = bits(mask);
    assert.ok(after.length > 0);
    for (const id of after) {
      const b = tok().tokenBytes(id)!;
      assert.ok(b[0] >= 0x80 && b[0] <= 0xbf, `after a lead byte only continuation bytes may follow, got ${Array.from(b)}`);
    }
    // And no token that would make the string invalid UTF-8 is allowed anywhere.
    const bad = tok().encode('"')[0];
    assert.ok(!after.includes(bad));
  });

  it('forcedToken returns the token the grammar forces, so sampling can be skipped', () => {
    const c = compileConstraint({ jsonSchema: { const: { greeting: 'hello world' } } }, tok());
    const m = c.newMatcher();
    const out: number[] = [];
    for (let guard = 0; guard < 100 && !m.isDone(); guard++) {
      const f = m.forcedToken();
      assert.notStrictEqual(f, null, `the whole output is forced, stuck after ${JSON.stringify(tok().decode(out))}`);
      m.accept(f!);
      out.push(f!);
    }
    assert.strictEqual(tok().decode(out), '{"greeting":"hello world"}');
    assert.ok(out.length < 10, 'forced tokens are the longest that fit');
    const single = compileConstraint({ grammar: 'root ::= "x"' }, tok()).newMatcher();
    assert.strictEqual(single.forcedToken(), tok().encode('x')[0]);
    const free = compileConstraint({ grammar: 'root ::= [a-z]+' }, tok()).newMatcher();
    assert.strictEqual(free.forcedToken(), null);
  });

  it('gives the shortest completion, as bytes and as tokens, from any point', () => {
    const c = compileConstraint({ jsonSchema: { type: 'object', properties: { a: { type: 'array', items: { type: 'integer' }, minItems: 2 } }, required: ['a'] } }, tok());
    const m = c.newMatcher();
    for (const id of tok().encode('{"a":[1')) m.accept(id);
    const completion = new TextDecoder().decode(m.shortestCompletion());
    assert.strictEqual(completion, ',0]}');
    for (const id of m.completionTokens()!) m.accept(id);
    assert.ok(m.isAccepting());
    assert.deepStrictEqual(c.validateOutput('{"a":[1,0]}'), { a: [1, 0] });
  });

  it('serves many concurrent matchers on one compiled constraint independently', () => {
    const schema = { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } }, required: ['id', 'name'] };
    const c = compileConstraint({ jsonSchema: schema }, tok());
    assert.strictEqual(compileConstraint({ jsonSchema: schema }, tok()), c, 'the same constraint is compiled once per vocabulary');
    const rand = mulberry32(7);
    const texts = Array.from({ length: 64 }, (_, i) => JSON.stringify({ id: i * 37 - 500, name: 'n'.repeat(i % 9) + 'é'.repeat(i % 3) }));
    const jobs = texts.map((t) => ({ ids: tok().encode(t), at: 0, m: c.newMatcher() }));
    const mask = new Uint32Array(2048);
    while (jobs.some((j) => j.at < j.ids.length)) {
      const j = jobs[Math.floor(rand() * jobs.length)];
      if (j.at >= j.ids.length) continue;
      j.m.fillMask(mask);
      const id = j.ids[j.at++];
      assert.ok((mask[id >>> 5] >>> (id & 31)) & 1);
      j.m.accept(id);
    }
    jobs.forEach((j, i) => {
      assert.ok(j.m.isAccepting(), texts[i]);
      assert.deepStrictEqual(c.validateOutput(texts[i]), JSON.parse(texts[i]));
    });
  });

  it('checks the mask size and refuses foreign token ids', () => {
    const m = compileConstraint({ grammar: 'root ::= "a"' }, tok()).newMatcher();
    assert.throws(() => m.fillMask(new Uint32Array(10)), /mask has 10 words/);
    assert.throws(() => m.accept(tok().vocabSize + 5), ConstraintError);
  });

  it('says so when a reduced vocabulary cannot continue the output', () => {
    const enc = new TextEncoder();
    const pieces = ['', 'a', 'b'];
    const vocab = { vocabSize: 3, tokenBytes: (id: number) => (id > 0 && id < 3 ? enc.encode(pieces[id]) : undefined) };
    const m = compileConstraint({ grammar: 'root ::= "a" "c"' }, vocab).newMatcher();
    m.accept(1);
    assert.throws(() => m.fillMask(new Uint32Array(1)), /no token of this vocabulary can continue/);
  });

  it('works with a small vocabulary given as plain data', () => {
    const pieces = ['', '{', '}', '"', 'a', 'b', ':', ',', '"a"', '1', '2'];
    const enc = new TextEncoder();
    const vocab = { vocabSize: pieces.length, tokenBytes: (id: number) => (id > 0 && id < pieces.length ? enc.encode(pieces[id]) : undefined) };
    const c = compileConstraint({ jsonSchema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false } }, vocab);
    const m = c.newMatcher();
    const mask = new Uint32Array(1);
    m.fillMask(mask);
    assert.deepStrictEqual(bits(mask), [1]);
    m.accept(1);
    m.fillMask(mask);
    assert.deepStrictEqual(bits(mask), [3, 8]);
    assert.strictEqual(m.forcedToken(), 8, 'the longest token inside the forced bytes "a":');
  });
});
