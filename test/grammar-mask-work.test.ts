// Work done to compute token masks, measured as counts (automaton states built, parses per
// state) rather than time, so the bounds hold on a loaded machine. Mask time itself is measured
// by the bench (`npm run bench -- --sections schema-coverage`: mask p50/p99/max, share over 1 ms).

import * as assert from 'assert';
import * as v8 from 'v8';
import * as vm from 'vm';
import { compileConstraint, canonicalJson } from '../engine/grammar';
import type { CompiledGrammarConstraint } from '../engine/grammar/compiled-constraint';
import { collapsedPositions } from '../engine/grammar/counted-repetition';
import { deterministicRegex } from '../engine/grammar/regex-automata';
import { regexBranches } from '../engine/grammar/regex-to-expr';
import { schemaKeyRank } from '../engine/grammar/schema-to-grammar';
import { DEAD } from '../engine/grammar/stack-automaton';
import type { TokenMasks } from '../engine/grammar/token-masks';
import { StringSlice } from '../engine/grammar/string-slice';
import { TokenTrie } from '../engine/grammar/token-trie';
import { mulberry32 } from './grammar-sampler';
import { worldTokenizer } from './grammar-vocab';

/** Steps through a value's JSON computing every mask; returns the automaton and the parses (stacks) per step. */
function walkMasks(schema: object, value: unknown): { c: CompiledGrammarConstraint; steps: { text: string; parses: number }[] } {
  const tok = worldTokenizer();
  const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
  const m = c.newMatcher();
  const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
  const steps: { text: string; parses: number }[] = [];
  let text = '';
  const parses = () => c.automaton.stackCount((m as unknown as { state: number }).state);
  for (const id of tok.encode(canonicalJson(value, schemaKeyRank(schema as never)))) {
    m.fillMask(mask);
    assert.ok((mask[id >>> 5] >>> (id & 31)) & 1, `token ${id} must be allowed`);
    m.accept(id);
    text += tok.decode([id]);
    steps.push({ text, parses: parses() });
  }
  m.fillMask(mask);
  assert.ok(mask[0] & 1, 'the end must be allowed');
  return { c, steps };
}

const manyOptional = (n: number, extra: object | boolean = true) => ({
  type: 'object',
  properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`field${i}`, { type: 'string' }])),
  additionalProperties: extra,
});

describe('token mask work is bounded by counts', function () {
  this.timeout(120000);

  it('an extra key of an object with many optional properties is one parse, not one per skippable property', () => {
    const schema = manyOptional(80, { type: 'integer' });
    const { steps } = walkMasks(schema, { field3: 'a', extraKey: 1 });
    const before = '{"field3":"a","';
    const inKey = steps.filter((s) => s.text.startsWith(before) && s.text.length > before.length && !s.text.slice(before.length).includes('"'));
    assert.ok(inKey.length > 0);
    // Before, the extra key was parsed once per optional member that could be skipped before
    // it (76 of them), each parse as many stacks as a character's UTF-8 forms.
    for (const s of inKey) assert.ok(s.parses <= 16, `${s.parses} parses after ${JSON.stringify(s.text)}`);
  });

  it('inside keys the schema does not declare, the recognizer is in one state whichever name the key left', () => {
    const tok = worldTokenizer();
    const c = compileConstraint({ jsonSchema: manyOptional(30, { type: 'integer' }) }, tok) as CompiledGrammarConstraint;
    const stateAfter = (text: string) => {
      const m = c.newMatcher();
      for (const id of tok.encode(text)) m.accept(id);
      return (m as unknown as { state: number }).state;
    };
    // Each key leaves the declared names (field0..field29) after a different prefix.
    const states = new Set(['{"Qz', '{"fQz', '{"fieldQz', '{"field1Qz', '{"field29Qz'].map(stateAfter));
    assert.strictEqual(states.size, 1);
    // Also in the middle of a character outside ASCII (after its first UTF-8 byte alone).
    const lead = Array.from({ length: tok.vocabSize }, (_, id) => id).find((id) => {
      const b = tok.tokenBytes(id);
      return b?.length === 1 && b[0] === 0xc3;
    })!;
    const midChar = (text: string) => {
      const m = c.newMatcher();
      for (const id of [...tok.encode(text), lead]) m.accept(id);
      return (m as unknown as { state: number }).state;
    };
    assert.strictEqual(new Set(['{"', '{"f', '{"field', '{"field2'].map(midChar)).size, 1);
  });

  it('inside an unanchored pattern the stacks do not grow with the places a match could start', () => {
    // `.+` unanchored is `.*.+.*`: as an expression, one parse per split of the text so far (24
    // stacks at the first character, 49 after two). Its minimal deterministic automaton has a
    // stack per alternative of one state (not minimal, it is kept as the expression: after `a` and
    // after `a\u2028` it has two states that accept anything and neither loops).
    const schema = { type: 'object', properties: { p: { type: 'string', pattern: '.+' }, q: { type: 'string', pattern: '.*:.*' } } };
    const { steps } = walkMasks(schema, { p: 'my-log-group name', q: 'target one:operation two' });
    const inside = steps.filter((s) => /"[pq]":"[^"]*$/.test(s.text));
    assert.ok(inside.length >= 8);
    for (const s of inside) assert.ok(s.parses <= 16, `${s.parses} parses after ${JSON.stringify(s.text)}`);
  });

  it('a counted string beside other parses is masked by its chain, not by a vocabulary walk per character', () => {
    // maxLength without a type, under anyOf: in one branch `name` is a string of at most 100
    // characters, in the other any value. Walked together, every character of the counted
    // string crossed out of the shared walks' cut: ~120,000 trie nodes a mask.
    const owner = (key: string) => ({ properties: { [key]: { maxLength: 100 } }, required: [key], additionalProperties: true });
    const schema = { type: 'object', properties: { owner: { anyOf: [owner('name'), owner('login')], type: 'object' } } };
    const tok = worldTokenizer();
    const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
    const masks = (c as unknown as { masks: TokenMasks }).masks;
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    let text = '';
    const perMask: number[] = [];
    for (const id of tok.encode('{"owner":{"name":"John Doe is a very long name that is still under the limit"}}')) {
      const before = masks.walkedNodes;
      m.fillMask(mask);
      if (/"name":"[^"]+$/.test(text)) perMask.push(masks.walkedNodes - before);
      m.accept(id);
      text += tok.decode([id]);
    }
    assert.ok(perMask.length >= 8);
    for (const n of perMask) assert.ok(n <= 5_000, `${n} trie nodes walked for one mask inside the counted string`);
  });

  it("pattern automata take the states they explore from one budget per schema, and stop at it", () => {
    // `[ab]*a[ab]{8}` has a 512-state automaton (~40 ms to explore): without a budget, 40 such
    // patterns in one schema took 1.7 s to compile (85 ms as expressions).
    const expr = regexBranches('[ab]*a[ab]{8}', 'u')[0].expr;
    const budget = { states: 900 };
    const limits = { states: 1_000, walked: 600, budget };
    assert.ok(deterministicRegex(expr, 'a', 'p', limits), 'the first fits');
    assert.ok(budget.states <= 900 - 500 && budget.states >= 0, `${budget.states} left`);
    const left = budget.states;
    assert.strictEqual(deterministicRegex(expr, 'b', 'p', limits), null, 'the second does not');
    assert.ok(budget.states >= 0 && budget.states < left);
    // And through a schema: 40 of them compile with the budget's worth of exploring at most.
    const props = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, { type: 'string', pattern: `[ab]*a[ab]{8}${'x'.repeat(i)}` }]));
    const c = compileConstraint({ jsonSchema: { type: 'object', properties: props } }, worldTokenizer());
    assert.ok(c);
  });

  it('the masks of a long instance build automaton states of bounded total size', () => {
    const value = Object.fromEntries(Array.from({ length: 120 }, (_, i) => [i % 3 ? `field${i}` : `x${i}`, `v${i}`]));
    const { c } = walkMasks(manyOptional(120), value);
    const parses = c.automaton.parseCount;
    // 165k here; 7.9M before objects were unambiguous and masks shared by stack tops.
    assert.ok(parses <= 400_000, `${c.stateCount} states, ${parses} parses in all`);
  });

  /** Heap bytes per automaton state after walking `value`'s masks on a fresh compilation of `schema` (with its own title). */
  function heapBytesPerState(schema: object, value: unknown): { perState: number; states: number } {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const tok = worldTokenizer();
    compileConstraint({ jsonSchema: { type: 'object', properties: { warm: { type: 'string' } } } }, tok).newMatcher().fillMask(new Uint32Array((tok.vocabSize + 31) >>> 5));
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
    assert.ok(c.stateCount < 100, `a fresh compilation (${c.stateCount} states before any mask)`);
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    for (const id of tok.encode(canonicalJson(value, schemaKeyRank(schema as never)))) {
      m.fillMask(mask);
      m.accept(id);
    }
    gc();
    gc();
    return { perState: (process.memoryUsage().heapUsed - before) / c.stateCount, states: c.stateCount };
  }

  it('automaton states and cached walks keep under 850 heap bytes a state (every full collection marks them)', () => {
    // A full collection's pause grows with the objects the cached constraints hold: 1,576 bytes a
    // state here when each state was an Int32Array and Map entries of its own and each walk
    // result a typed array (pauses of 100-260 ms in the MaskBench run); 750 with the stacks in one
    // pool, 531 with walk results packed in arenas (walk-store.ts).
    const value = Object.fromEntries(Array.from({ length: 120 }, (_, i) => [i % 3 ? `field${i}` : `x${i}`, `v${i}`]));
    // Its own title: the same schema compiled by another test would come from the cache, walked already.
    const { perState, states } = heapBytesPerState({ ...manyOptional(120), title: 'heap bytes per state' }, value);
    assert.ok(states > 2000, `${states} states`);
    assert.ok(perState < 850, `${perState.toFixed(0)} heap bytes per state (${states} states)`);
  });

  it("the vocabulary's tries keep their tokens' bytes in one pool, not two heap objects per token", () => {
    // Built once per vocabulary and alive for the process: every full collection marked the
    // 65,000 Uint8Arrays and buffers of the World vocabulary's tokens (130,000 of 320,000 heap
    // objects after 400 MaskBench schemas), and those pauses landed inside masks.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const tok = worldTokenizer();
    // A vocabulary object of its own, so the trie and its slice are built here, not taken from the caches.
    const vocab = { vocabSize: tok.vocabSize, tokenBytes: (id: number) => tok.tokenBytes(id) };
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    const trie = TokenTrie.of(vocab);
    const slice = StringSlice.of(trie);
    gc();
    gc();
    const kept = process.memoryUsage().heapUsed - before;
    assert.deepStrictEqual(Array.from(trie.tokenBytes(tok.encode(' hello')[0])!), Array.from(tok.tokenBytes(tok.encode(' hello')[0])!));
    assert.ok(slice.safe.nodeCount > 60000);
    assert.ok(kept < 2_000_000, `${(kept / 1e6).toFixed(1)} MB of heap kept by the tries of one vocabulary`);
  });

  it('so do the chains of counted strings and the top-frame walks of objects in arrays', () => {
    // What masks keep besides states: per state the chains' runs (7 bytes, twice: whole states
    // and cut ones), per stack node its cuts and the state after it pops, and top-frame walks in
    // the 2,048 shared walks kept.
    const properties = Object.fromEntries(
      Array.from({ length: 60 }, (_, i) => [`field${i}`, i % 3 === 0 ? { type: ['string', 'null'], maxLength: 200 + (i % 4) } : { type: 'string', maxLength: 1000 + (i % 5), minLength: i % 2 }]),
    );
    const tag = { type: 'object', properties: { key: { type: 'string', pattern: '^[0-9a-zA-Z_-]{1,255}$' }, value: { type: 'string', maxLength: 255 } } };
    const schema = { type: 'object', properties: { ...properties, tags: { type: 'array', items: tag, maxItems: 100 } }, title: 'heap bytes per state, counted' };
    const value = { ...Object.fromEntries(Object.keys(properties).map((k, i) => [k, `value ${i}`])), tags: Array.from({ length: 30 }, (_, i) => ({ key: `k-${i}`, value: `v ${i}` })) };
    const { perState, states } = heapBytesPerState(schema, value);
    assert.ok(states > 2000, `${states} states`);
    assert.ok(perState < 850, `${perState.toFixed(0)} heap bytes per state (${states} states)`);
  });

  it('the places of a long counted string share one mask until the longest token can reach its end', () => {
    const tok = worldTokenizer();
    for (const bound of [{ maxLength: 32767 }, { minLength: 5000 }, { minLength: 4, maxLength: 10000 }]) {
      const c = compileConstraint({ jsonSchema: { type: 'string', ...bound } }, tok) as CompiledGrammarConstraint;
      const masks = (c as unknown as { masks: TokenMasks }).masks;
      const m = c.newMatcher();
      const out = new Uint32Array((tok.vocabSize + 31) >>> 5);
      const seen = new Set<unknown>();
      let built = 0;
      // 2,000 characters in, well inside every bound (ASCII, 'é', '日': counted in characters),
      // past minLength 4's first places (where the string may not end yet).
      const ids = tok.encode('"' + 'ab é日 '.repeat(400));
      for (const [k, id] of ids.entries()) {
        m.accept(id);
        if (k < 5) continue;
        const before = c.automaton.stateCount;
        seen.add(masks.get((m as unknown as { state: number }).state));
        m.fillMask(out);
        if (seen.size > 1) built += c.automaton.stateCount - before;
      }
      // The first mask inside the string builds the chain of places near an end; after it none.
      assert.strictEqual(seen.size, 1, `${JSON.stringify(bound)}: ${seen.size} different masks inside the string`);
      assert.strictEqual(built, 0);
    }
  });

  it('inside every string of a schema the character stacks are the same, so one shared walk serves them all', () => {
    const tok = worldTokenizer();
    const schema = {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: 'string', minLength: 2 }, c: { type: 'array', items: { type: 'string', maxLength: 300 } }, d: { type: 'string', maxLength: 500 } },
    };
    const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
    const a = c.automaton;
    // The stacks that read an 'x' there, cut to their top two frames (the character and the
    // loop or count around it): what shared mask walks are keyed by.
    const tops = (text: string) => {
      const m = c.newMatcher();
      for (const id of tok.encode(text)) m.accept(id);
      const cuts = [...a.stacksOf((m as unknown as { state: number }).state)].map((n) => a.topState(n, 2));
      return cuts.filter((s) => a.next(s, 0x78) >= 0).sort((x, y) => x - y).join(',');
    };
    // Equal groups are one rule: the loop of every unbounded string (past a minLength too), and
    // a maxLength's chain of optional copies (300 left of 300 or of 500: the same links).
    assert.ok(tops('{"a":"xy') !== '');
    assert.strictEqual(tops('{"a":"xy'), tops('{"b":"xyz'));
    assert.strictEqual(tops('{"c":["' + 'x'.repeat(10)), tops('{"d":"' + 'x'.repeat(210)));
  });

  it('the first key of an object with many declared keys builds a few states per key, not one per character', () => {
    const tok = worldTokenizer();
    const properties = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`property_number_${i}`, { type: 'integer' }]));
    const c = compileConstraint({ jsonSchema: { type: 'object', properties, additionalProperties: false } }, tok) as CompiledGrammarConstraint;
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    for (const id of tok.encode('{"')) m.accept(id);
    const before = c.automaton.stateCount;
    m.fillMask(mask);
    // Each name is read along the token trie without a state per byte: 121 here, 541 before.
    const built = c.automaton.stateCount - before;
    assert.ok(built <= 3 * 60, `${built} states for 60 keys of 18 or 19 bytes`);
  });

  it("a counted string's first character takes its run from a chain shared by every string with that count", () => {
    // Each string's place in its object is other frames under it: followed on whole states, its
    // chain was a cap's worth of states of its own at every string's first character (150 states,
    // 10-50 ms each in MaskBench's Snowplow schemas); followed on the string's own frames, once.
    const tok = worldTokenizer();
    const keys = Array.from({ length: 12 }, (_, i) => `name_${i}`);
    const properties = Object.fromEntries(keys.map((k, i) => [k, i % 2 ? { type: 'string', maxLength: 1000 } : { type: ['string', 'null'], maxLength: 1000 }]));
    const c = compileConstraint({ jsonSchema: { type: 'object', properties, additionalProperties: false } }, tok) as CompiledGrammarConstraint;
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    const atStart: number[] = [];
    let text = '';
    for (const id of tok.encode(canonicalJson(Object.fromEntries(keys.map((k) => [k, 'some text'])), schemaKeyRank({ properties } as never)))) {
      const before = c.automaton.stateCount;
      m.fillMask(mask);
      if (text.endsWith('":"')) atStart.push(c.automaton.stateCount - before);
      m.accept(id);
      text += tok.decode([id]);
    }
    assert.strictEqual(atStart.length, keys.length);
    // The first string of each kind (nullable or not) follows the chain; the others find it.
    for (const built of atStart.slice(2)) assert.ok(built <= 40, `${built} states built at a string's first character (${atStart.join(', ')})`);
  });

  it("the keys and values of an array's objects are walked once, not again at every element", () => {
    // maxItems makes each element a copy with a frame of its own under the object; cut to two
    // frames, every element's key start was a new walk (33,000 trie nodes, 83 states in
    // MaskBench's Github_medium o9853 deviceTags).
    const tok = worldTokenizer();
    const tag = { type: 'object', properties: { key: { type: 'string', pattern: '^[0-9a-zA-Z_-]{1,255}$' }, value: { type: 'string', minLength: 1, maxLength: 255 } }, additionalProperties: false };
    const schema = { type: 'object', properties: { tags: { type: 'array', items: tag, maxItems: 100 } } };
    const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
    const masks = (c as unknown as { masks: TokenMasks }).masks;
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    const perElement: number[] = [];
    let text = '';
    const tags = Array.from({ length: 6 }, (_, i) => ({ key: `device-type-${i}`, value: `phone ${i}` }));
    for (const id of tok.encode(canonicalJson({ tags }, schemaKeyRank(schema as never)))) {
      const before = masks.walkedNodes;
      m.fillMask(mask);
      if (text.endsWith('{"key":"')) perElement.push(masks.walkedNodes - before);
      m.accept(id);
      text += tok.decode([id]);
    }
    assert.strictEqual(perElement.length, tags.length);
    for (const n of perElement.slice(1)) assert.ok(n <= 2_000, `${n} trie nodes walked at a later element's key value (${perElement.join(', ')})`);
  });

  it('the first key of an object whose keys contain one of many names takes the safe tokens as a block', () => {
    // MaskBench's Github_hard o48423: a key is any text containing one of 30 game names. As an
    // expression (its automaton's 200 states before a match do not loop) the first key walked
    // 32,000 trie nodes and built 487 states (50-80 ms); as its automaton, whose every state
    // before the match takes every safe character, only the tokens outside the safe slice are walked.
    const games = 'Red|Blue|Yellow|Gold|Silver|Crystal|Ruby|Sapphire|Emerald|FireRed|LeafGreen|Diamond|Pearl|Platinum|HeartGold|SoulSilver|Black|White|Black 2|White 2|X|Y|Omega Ruby|Alpha Sapphire|Sun|Moon|Ultra Sun|Ultra Moon|Let\'s Go Pikachu|Let\'s Go Eevee';
    const entry = { type: 'object', properties: { en: { type: 'string' }, de: { type: 'string' } }, additionalProperties: false };
    const schema = { type: 'object', properties: { pokedex_entries: { type: 'object', patternProperties: { [games]: entry }, additionalProperties: false } } };
    const tok = worldTokenizer();
    const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
    const masks = (c as unknown as { masks: TokenMasks }).masks;
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    for (const id of tok.encode('{"pokedex_entries":{"')) m.accept(id);
    const states = c.automaton.stateCount, nodes = masks.walkedNodes;
    m.fillMask(mask);
    const built = c.automaton.stateCount - states, walked = masks.walkedNodes - nodes;
    assert.ok(walked <= 3_000 && built <= 150, `${walked} trie nodes walked and ${built} states built at the first key`);
    // And the next keys (a name and one letter in) cost as little.
    for (const text of ['Red', 'Black 2":{"en":"x"},"U']) {
      for (const id of tok.encode(text)) m.accept(id);
      const s0 = c.automaton.stateCount, n0 = masks.walkedNodes;
      m.fillMask(mask);
      assert.ok(masks.walkedNodes - n0 <= 3_000 && c.automaton.stateCount - s0 <= 150, `${masks.walkedNodes - n0} nodes, ${c.automaton.stateCount - s0} states after ${text}`);
    }
  });

  it('inside an anchored pattern past its literal start, `.+` and a suffix take the safe tokens as a block', () => {
    // Github_medium o90224's `^file:.+\\.km[lz]$`: as an expression, after `file:` a parse per
    // place of the suffix, none looping: two walks of the whole safe trie (234,220 nodes,
    // 58-81 ms). As its automaton every state there takes every safe run.
    const schema = { type: 'object', properties: { path: { type: 'string', pattern: '^file:.+\\.km[lz]$' } } };
    const tok = worldTokenizer();
    const c = compileConstraint({ jsonSchema: schema }, tok) as CompiledGrammarConstraint;
    const masks = (c as unknown as { masks: TokenMasks }).masks;
    const m = c.newMatcher();
    const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
    const perMask: number[] = [];
    let text = '';
    for (const id of tok.encode('{"path":"file:example.kml"}')) {
      const n0 = masks.walkedNodes;
      m.fillMask(mask);
      if (text.includes('file:')) perMask.push(masks.walkedNodes - n0);
      m.accept(id);
      text += tok.decode([id]);
    }
    assert.ok(perMask.length >= 3);
    for (const n of perMask) assert.ok(n <= 3_000, `${n} trie nodes walked for one mask after file: (${perMask.join(', ')})`);
  });

  it('the recognizer grows without copying what it built: a step adds at most a page of transition rows', () => {
    // The rows were one buffer doubled by copying: the step that built the 8,192nd, 16,384th,
    // 32,768th or 65,536th state copied 8-64 MiB (20-80 ms inside one mask in detekt's schema).
    const rand = mulberry32(5);
    const words = [...new Set(Array.from({ length: 4000 }, () => Array.from({ length: 8 }, () => String.fromCharCode(97 + Math.floor(rand() * 26))).join('')))];
    const c = compileConstraint({ grammar: `root ::= ${words.map((w) => `"${w}"`).join(' | ')}` }, worldTokenizer()) as CompiledGrammarConstraint;
    const a = c.automaton;
    let most = 0;
    for (const w of words) {
      const before = a.transitionBytes;
      assert.notStrictEqual(a.run(a.initial, Buffer.from(w)), DEAD);
      most = Math.max(most, a.transitionBytes - before);
    }
    // Every prefix is a state of its own: past 16,384, where the buffer doubled from 16 to 32 MiB.
    assert.ok(a.stateCount > 20000, `${a.stateCount} states`);
    // 8 new states a word: one page of 64 rows (64 KiB), or two where they straddle pages.
    assert.ok(most <= 2 * 64 * 1024, `${most} bytes of transition rows allocated by one word`);
    assert.ok(a.transitionBytes <= (a.stateCount + 64) * 1024, `${a.transitionBytes} bytes of rows for ${a.stateCount} states`);
  });

  it('collapses counted repetitions only past the given number of copies, and never loops', () => {
    const tables = (schema: object) => (compileConstraint({ jsonSchema: schema }, worldTokenizer()) as CompiledGrammarConstraint).automaton.g;
    const moved = (map: Int32Array | null) => (map ? map.filter((to, p) => to !== p).length : 0);
    assert.strictEqual(collapsedPositions(tables({ type: 'string' }), 128), null);
    assert.strictEqual(collapsedPositions(tables({ type: 'string', maxLength: 128 }), 128), null);
    // maxLength 200: the optional copies 129..200 map onto copy 128's rule (X then the reference: 2 positions + END each).
    assert.strictEqual(moved(collapsedPositions(tables({ type: 'string', maxLength: 200 }), 128)), 72 * 3);
    // minLength 200: copies in a row; the first 72 map onto the 73rd (128 ahead of it).
    assert.strictEqual(moved(collapsedPositions(tables({ type: 'string', minLength: 200 }), 128)), 72);
    assert.throws(() => collapsedPositions(tables({ type: 'string' }), 1), /at least 2/);
  });
});
