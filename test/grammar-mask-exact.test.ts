// The fast masks (shared walks per stack top, string-safe tokens taken as blocks where a state
// loops or by length where it counts, counted repetitions collapsed past a token's length,
// crossings re-walked from deeper cuts of each stack) equal the slow reference: every
// vocabulary token's bytes run through the automaton from the state, allowed when it survives.
// States come from seeded random walks through random schemas and through hand-made cases that
// take each path (strings that loop, strings that count or exclude characters, minLength and
// maxLength on both sides of a token's length and past 4,096, objects with many declared keys,
// undeclared keys, tokens that close many nesting levels at once).

import * as assert from 'assert';
import { compileConstraint } from '../engine/grammar';
import type { CompiledGrammarConstraint } from '../engine/grammar/compiled-constraint';
import { BYTES, END, REF } from '../engine/grammar/flat-grammar';
import { DEAD, StackAutomaton } from '../engine/grammar/stack-automaton';
import { TokenMasks } from '../engine/grammar/token-masks';
import { utf8Sequences } from '../engine/grammar/utf8-sequences';
import { SafeRunRules } from '../engine/grammar/safe-run-rules';
import { MAX_SAFE_RUN_STATES, SafeRunCheck } from '../engine/grammar/safe-runs';
import { isStringSafe, loopsOverSafeChars, StringSlice } from '../engine/grammar/string-slice';
import { TokenTrie } from '../engine/grammar/token-trie';
import { randomSchema } from './grammar-random-schemas';
import { mulberry32 } from './grammar-sampler';
import { worldTokenizer } from './grammar-vocab';

type Matcher = ReturnType<CompiledGrammarConstraint['newMatcher']>;

function stateOf(m: Matcher): number {
  return (m as unknown as { state: number }).state;
}

function referenceMask(c: CompiledGrammarConstraint, state: number): Uint32Array {
  const tok = worldTokenizer();
  const a = c.automaton;
  const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
  if (a.accepting(state)) mask[0] |= 1;
  for (let id = 1; id < tok.vocabSize; id++) {
    const b = tok.tokenBytes(id);
    if (b && b.length > 0 && a.run(state, b) !== DEAD) mask[id >>> 5] |= 1 << (id & 31);
  }
  return mask;
}

function allowedIds(mask: Uint32Array): number[] {
  const out: number[] = [];
  for (let w = 0; w < mask.length; w++) for (let x = mask[w]; x !== 0; x &= x - 1) out.push(w * 32 + 31 - Math.clz32(x & -x));
  return out;
}

/** Token ids whose bytes include a byte that is not a letter or digit: they leave strings and close values. */
function structural(id: number): boolean {
  const b = worldTokenizer().tokenBytes(id);
  return !!b && b.some((x) => !((x >= 0x30 && x <= 0x39) || (x >= 0x41 && x <= 0x5a) || (x >= 0x61 && x <= 0x7a)));
}

/**
 * Walks `steps` random tokens through the constraint, comparing every mask with the reference;
 * `prefix` (text) is accepted first. Returns the number of masks compared.
 */
function compareAlongWalk(c: CompiledGrammarConstraint, seed: number, steps: number, prefix = ''): number {
  const tok = worldTokenizer();
  const rand = mulberry32(seed);
  const m = c.newMatcher();
  for (const id of tok.encode(prefix)) m.accept(id);
  const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
  let compared = 0;
  for (let step = 0; step < steps; step++) {
    m.fillMask(mask);
    const want = referenceMask(c, stateOf(m));
    for (let w = 0; w < mask.length; w++)
      if (mask[w] !== want[w]) {
        const diff = allowedIds(new Uint32Array([mask[w] ^ want[w]])).map((i) => w * 32 + i);
        const shown = diff.slice(0, 5).map((id) => `${id} ${JSON.stringify(tok.decode([id]))} (${(want[id >>> 5] >>> (id & 31)) & 1 ? 'missing' : 'extra'})`);
        assert.fail(`seed ${seed}, step ${step}, after ${JSON.stringify(prefix)}: mask differs from the reference at ${shown.join(', ')}`);
      }
    compared++;
    const ids = allowedIds(mask).filter((id) => id !== 0);
    if (ids.length === 0) break;
    // Half the time a structural token, so walks leave strings and go on through the document.
    const pool = rand() < 0.5 ? ids.filter(structural) : ids;
    const from = pool.length ? pool : ids;
    m.accept(from[Math.floor(rand() * from.length)]);
  }
  return compared;
}

/**
 * A byte-level grammar no text grammar lowers to: a lone UTF-8 lead byte 0xC3, then any run of
 * whole safe characters. After 0xC3 the automaton loops, but a token such as "é" (C3 A9) goes on
 * with a continuation byte there, which the loop does not take.
 */
function leadThenLoop(): StackAutomaton {
  const kind: number[] = [], arg: number[] = [], sets: Uint8Array[] = [];
  const set = (lo: number, hi: number) => {
    const s = new Uint8Array(256);
    s.fill(1, lo, hi + 1);
    sets.push(s);
    return sets.length - 1;
  };
  const at = (k: number, a = 0) => (kind.push(k), arg.push(a), kind.length - 1);
  const rootAlt = at(BYTES, set(0xc3, 0xc3));
  at(REF, 1);
  at(END);
  const loopAlts: number[] = [];
  const safe = [0x20, 0x21, 0x23, 0x5b, 0x5d, 0xd7ff, 0xe000, 0x10ffff];
  for (let i = 0; i < safe.length; i += 2)
    for (const seq of utf8Sequences(safe[i], safe[i + 1])) {
      loopAlts.push(kind.length);
      for (const [lo, hi] of seq) at(BYTES, set(lo, hi));
      at(REF, 1);
      at(END);
    }
  loopAlts.push(at(END));
  const byteSets = new Uint8Array(sets.length * 256);
  sets.forEach((s, i) => byteSets.set(s, i * 256));
  return new StackAutomaton({
    kind: Uint8Array.from(kind),
    arg: Int32Array.from(arg),
    byteSets,
    altStarts: Int32Array.from([rootAlt, ...loopAlts]),
    ruleAltIndex: Int32Array.from([0, 1, 1 + loopAlts.length]),
    root: 0,
    minLen: Float64Array.from([1, 0]),
    bestAlt: Int32Array.from([rootAlt, loopAlts[loopAlts.length - 1]]),
  });
}

function compiled(spec: Parameters<typeof compileConstraint>[0]): CompiledGrammarConstraint {
  return compileConstraint(spec, worldTokenizer()) as CompiledGrammarConstraint;
}

describe('token masks equal the reference masks', function () {
  this.timeout(600000);

  it('splits the vocabulary into string-safe tokens and the rest, with every token in exactly one', () => {
    const tok = worldTokenizer();
    const slice = StringSlice.of(TokenTrie.of(tok));
    let safe = 0, rest = 0;
    for (let id = 1; id < tok.vocabSize; id++) {
      const b = tok.tokenBytes(id);
      if (!b || b.length === 0) continue;
      const inSafe = ((slice.safeMask[id >>> 5] >>> (id & 31)) & 1) === 1;
      assert.strictEqual(inSafe, isStringSafe(b), `token ${id}`);
      if (inSafe) safe++;
      else rest++;
    }
    assert.strictEqual(slice.tokensInOrder.length, safe);
    assert.ok(rest > 0 && rest < safe / 20, `${rest} tokens outside the safe slice, ${safe} in it`);
    const bytes = (...b: number[]) => Uint8Array.from(b);
    assert.ok(isStringSafe(bytes(0x61, 0x20, 0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80, 0x7f)));
    for (const bad of [bytes(0x22), bytes(0x5c), bytes(0x0a), bytes(0xc3), bytes(0xc0, 0x80), bytes(0xed, 0xa0, 0x80), bytes(0xf4, 0x90, 0x80, 0x80), bytes(0xe2, 0x82)])
      assert.ok(!isStringSafe(bad), `${Array.from(bad)} is not string-safe`);
  });

  it('says a state loops over safe characters exactly when each of them leads back to it', () => {
    const a = compiled({ jsonSchema: { type: 'string' } }).automaton;
    const inString = a.run(a.initial, new TextEncoder().encode('"ab'));
    assert.ok(loopsOverSafeChars(a, inString));
    assert.ok(!loopsOverSafeChars(a, a.initial));
    // A string that may not hold 'é' loops on ASCII but not on every character.
    const noE = compiled({ jsonSchema: { type: 'string', pattern: '^[^é]*$' } }).automaton;
    assert.ok(!loopsOverSafeChars(noE, noE.run(noE.initial, new TextEncoder().encode('"ab'))));
    // A counted string never comes back to the same state.
    const short = compiled({ jsonSchema: { type: 'string', maxLength: 50 } }).automaton;
    assert.ok(!loopsOverSafeChars(short, short.run(short.initial, new TextEncoder().encode('"ab'))));
  });

  it('takes whole subtrees at loop states only between characters, not after a lone lead byte', () => {
    const a = leadThenLoop();
    const masks = new TokenMasks(a, TokenTrie.of(worldTokenizer()));
    assert.ok(loopsOverSafeChars(a, a.next(a.initial, 0xc3)));
    const got = masks.get(a.initial);
    const want = referenceMask({ automaton: a } as CompiledGrammarConstraint, a.initial);
    const gotIds = got.mask ? allowedIds(got.mask) : Array.from(got.tokens!).sort((x, y) => x - y);
    assert.deepStrictEqual(gotIds, allowedIds(want));
    const e = worldTokenizer().encode('é');
    assert.ok(e.length === 1 && !gotIds.includes(e[0]), '"é" is not allowed: its second byte is a continuation byte');
  });

  it('on random walks through 25 random schemas', () => {
    let compared = 0;
    for (let seed = 1; seed <= 25; seed++) compared += compareAlongWalk(compiled({ jsonSchema: randomSchema(seed) }), seed, 24);
    assert.ok(compared >= 300, `${compared} masks compared`);
  });

  it('where strings loop, count, exclude characters, and where keys are not declared', () => {
    const schema = {
      type: 'object',
      properties: {
        free: { type: 'string' },
        short: { type: 'string', maxLength: 3 },
        noAccent: { type: 'string', pattern: '^[^éè"]*$' },
        // Any ASCII character first, then anything: the first characters that lead to a loop are almost all of ASCII.
        asciiFirst: { type: 'string', pattern: '^[ -~][\\s\\S]*$' },
        word: { enum: ['naïve', 'say "hi"', 'back\\slash', '日本'] },
        list: { type: 'array', items: { type: 'string' } },
      },
      additionalProperties: { type: 'string' },
    };
    const c = compiled({ jsonSchema: schema });
    const prefixes = ['', '{"free":"', '{"free":"x', '{"short":"ab', '{"noAccent":"a', '{"asciiFirst":"', '{"word":"', '{"list":["a","', '{"fr', '{"other', '{"otherKey":"v'];
    prefixes.forEach((p, k) => compareAlongWalk(c, 100 + k, 16, p));
  });

  it('in unanchored patterns, written as their deterministic automaton', () => {
    const schema = {
      type: 'object',
      properties: {
        some: { type: 'string', pattern: '.+' },
        colon: { type: 'string', pattern: '.*:.*' },
        file: { type: 'string', pattern: '^file:.+\\.km[lz]$' },
        digits: { type: 'string', pattern: '[0-9]{3}' },
        accent: { type: 'string', pattern: 'é|^x' },
      },
      additionalProperties: false,
    };
    const c = compiled({ jsonSchema: schema });
    const prefixes = ['{"some":"', '{"some":"my', '{"colon":"a', '{"colon":"a:', '{"file":"file:x', '{"file":"file:a.k', '{"digits":"a1', '{"digits":"12', '{"accent":"', '{"accent":"\u00e9'];
    prefixes.forEach((p, k) => compareAlongWalk(c, 300 + k, 16, p));
  });

  it('in unanchored patterns that contain one of many names (automata that take every safe run before their match)', () => {
    // Before a match every state takes every safe character though none loops: the safe tokens
    // are taken as a block there (safe-run-rules.ts). Names with escapes, non-ASCII letters and a
    // state that refuses characters (an anchored tail) take the other paths.
    const names = 'Red|Blue|Yellow|Gold|FireRed|LeafGreen|Black 2|White 2|X|Let\'s Go Eevee|Pokémon|日本|say "hi"|back\\\\slash';
    const schema = {
      type: 'object',
      properties: {
        game: { type: 'string', pattern: names },
        // Anchored at the start: before 'x' and a digit, characters are refused (not a block).
        tail: { type: 'string', pattern: '^x[0-9]' },
        entries: { type: 'object', patternProperties: { [names]: { type: 'integer' } }, additionalProperties: false },
      },
      additionalProperties: false,
    };
    const c = compiled({ jsonSchema: schema });
    const rules = new SafeRunRules(c.automaton.g);
    const takers = Array.from({ length: c.automaton.g.ruleAltIndex.length - 1 }, (_, r) => r).filter((r) => rules.takesEverySafeRun(r));
    assert.ok(takers.length >= 20, `${takers.length} rules take every safe run: the patterns are written as automata`);
    const prefixes = ['{"game":"', '{"game":"Re', '{"game":"Red', '{"game":"xLet\'s G', '{"game":"Pok\u00e9', '{"game":"\u65e5', '{"game":"say \\"h', '{"game":"back\\\\',
      '{"tail":"', '{"tail":"x', '{"tail":"x7', '{"entries":{"', '{"entries":{"Gol', '{"entries":{"GoldX":1,"', '{"entries":{"Black 2":1,"W'];
    prefixes.forEach((p, k) => compareAlongWalk(c, 700 + k, 14, p));
    // A state holding only some of a rule's reading alternatives is not inside the rule.
    const a = c.automaton;
    const m = c.newMatcher();
    for (const id of worldTokenizer().encode('{"game":"')) m.accept(id);
    const stacks = Array.from(a.stacksOf(stateOf(m)));
    const top = (n: number) => a.nodeTop(n), rest = (n: number) => a.nodeRest(n);
    assert.ok(rules.holdsWholeRule(stacks, top, rest));
    assert.ok(!rules.holdsWholeRule(stacks.slice(1), top, rest));
  });

  it('says every safe run is accepted exactly when no state that safe characters reach refuses one', () => {
    // Table automata: state s on byte b goes to t[s][b] (-1 refused). Safe characters are
    // ASCII 0x20.. and multi-byte; every non-ASCII byte here goes back to where it came from.
    const table = (n: number, edge: (s: number, b: number) => number) => ({ next: (s: number, b: number) => (s < n ? edge(s, b) : -1) });
    // A cycle of three states, each taking every character: accepted.
    const cycle = table(3, (s, b) => (b >= 0x80 ? s : (s + (b === 0x41 ? 1 : 0)) % 3));
    assert.ok(new SafeRunCheck(cycle).takesEverySafeRun(0));
    // A chain of 40 states taking every character, the last refusing 'z': refused from every one of them.
    const chain = table(41, (s, b) => (s === 40 && b === 0x7a ? -1 : b >= 0x80 ? s : Math.min(40, s + 1)));
    const check = new SafeRunCheck(chain);
    assert.ok(!check.takesEverySafeRun(0));
    assert.ok(!check.takesEverySafeRun(20) && !check.takesEverySafeRun(40));
    // A continuation byte refused inside a character is a refused run.
    const noCont = table(1, (_s, b) => (b === 0xbf ? -1 : 0));
    assert.ok(!new SafeRunCheck(noCont).takesEverySafeRun(0));
    // Past the bound the check gives up, though this chain ends in a loop (the state is walked
    // node by node: exact either way).
    const n = MAX_SAFE_RUN_STATES + 10;
    const long = table(n, (s, b) => (b >= 0x80 ? s : b === 0x41 ? Math.min(n - 1, s + 1) : s));
    const longCheck = new SafeRunCheck(long);
    assert.ok(!longCheck.takesEverySafeRun(0));
    assert.ok(longCheck.explored <= MAX_SAFE_RUN_STATES + 1, `${longCheck.explored} states explored`);
  });

  it('where a counted string and other parses share a state (maxLength without a type under anyOf)', () => {
    const owner = (key: string) => ({ properties: { [key]: { maxLength: 5 } }, required: [key], additionalProperties: true });
    const schema = { type: 'object', properties: { owner: { anyOf: [owner('name'), owner('login')], type: 'object' } } };
    const c = compiled({ jsonSchema: schema });
    const prefixes = ['{"owner":{"name":"', '{"owner":{"name":"Jo', '{"owner":{"name":"Jo\u00e9', '{"owner":{"name":"abcd', '{"owner":{"name":"abcde', '{"owner":{"name":"abcdef'];
    prefixes.forEach((p, k) => compareAlongWalk(c, 400 + k, 12, p));
  });

  it('a pattern written as its automaton accepts exactly the strings the regex matches', () => {
    const tok = worldTokenizer();
    const patterns = ['.+', '.*:.*', '^file:.+\\.km[lz]$', '[0-9]{3}', 'é|^x', 'a\\d?b$', '^x.*y$'];
    const texts = ['', 'a', 'my-log', ':', 'x:y', 'file:a.kml', 'file:.kml', 'file:a.kmx', 'a123', '12', 'é', 'xé', 'yx', 'ab', 'a1b', 'a12b', 'zab', 'abz', '"\\:', '日本:', 'file:日.kmz',
      // '.' matches neither line nor paragraph separator (left out of the safe characters for it).
      'xy', 'xaby', 'x\u2028y', 'x\u2029y', 'file:\u2028.kml'];
    for (const pattern of patterns) {
      const c = compiled({ jsonSchema: { type: 'string', pattern } });
      const re = new RegExp(pattern, 'u');
      for (const text of texts) {
        const m = c.newMatcher();
        const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
        let accepted = true;
        for (const id of tok.encode(JSON.stringify(text))) {
          m.fillMask(mask);
          if (!((mask[id >>> 5] >>> (id & 31)) & 1)) {
            accepted = false;
            break;
          }
          m.accept(id);
        }
        if (accepted) {
          m.fillMask(mask);
          accepted = (mask[0] & 1) === 1;
        }
        assert.strictEqual(accepted, re.test(text), `pattern ${pattern} on ${JSON.stringify(text)}`);
      }
    }
  });

  it('in strings with maxLength and minLength: bounds of 1, around the longest token, and past 4,096', () => {
    const longest = StringSlice.of(TokenTrie.of(worldTokenizer())).maxChars;
    assert.strictEqual(longest, 128, 'the World vocabulary\'s longest safe token (the bounds below are placed around it)');
    const bounded: Record<string, { type: 'string'; minLength?: number; maxLength?: number }> = {
      max1: { type: 'string', maxLength: 1 },
      max2: { type: 'string', maxLength: 2 },
      max127: { type: 'string', maxLength: 127 },
      max128: { type: 'string', maxLength: 128 },
      max129: { type: 'string', maxLength: 129 },
      max32767: { type: 'string', maxLength: 32767 },
      min1: { type: 'string', minLength: 1 },
      min130: { type: 'string', minLength: 130 },
      min5000: { type: 'string', minLength: 5000 },
      min3max5: { type: 'string', minLength: 3, maxLength: 5 },
      min4max4100: { type: 'string', minLength: 4, maxLength: 4100 },
      min4100max4300: { type: 'string', minLength: 4100, maxLength: 4300 },
    };
    // A count that ends in a state taking some safe characters: not a closed end.
    const countThenLetters = { type: 'string', pattern: '^[\\s\\S]{2,4}[a-z]+$' };
    // A count over some characters only: no chain (each character is checked).
    const someLetters = { type: 'string', pattern: '^[a-z ]{1,5}$' };
    const c = compiled({ jsonSchema: { type: 'object', properties: { ...bounded, countThenLetters, someLetters, list: { type: 'array', items: bounded.max129 } }, additionalProperties: false } });
    // Placed so that random tokens (half of them structural) reach each end of the count: in
    // characters, not bytes ('é' is 2 bytes, '日' 3, the emoji 4).
    const fill = (n: number) => Array.from({ length: n }, (_, i) => ['a', 'é', ' ', '日', 'b', '😀', '-'][i % 7]).join('');
    const prefixes = [
      '{"max1":"',
      '{"max2":"é',
      '{"max127":"' + fill(100),
      '{"max128":"' + fill(120),
      '{"max128":"' + fill(1),
      '{"max129":"' + fill(2),
      '{"max129":"' + fill(126),
      '{"max32767":"' + fill(40),
      '{"max32767":"' + fill(32700),
      '{"min1":"',
      '{"min130":"' + fill(5),
      '{"min130":"' + fill(125),
      '{"min5000":"' + fill(4980),
      '{"min3max5":"é',
      '{"min4max4100":"a',
      '{"min4max4100":"' + fill(4090),
      '{"min4100max4300":"' + fill(4000),
      '{"min4100max4300":"' + fill(4290),
      '{"countThenLetters":"',
      '{"countThenLetters":"é日',
      '{"someLetters":"a',
      '{"list":["' + fill(125),
      '{"list":["a","' + fill(129),
    ];
    let compared = 0;
    prefixes.forEach((p, k) => (compared += compareAlongWalk(c, 600 + k, 10, p)));
    assert.ok(compared >= 150, `${compared} masks compared`);
  });

  it('in counted strings whose chains are followed on their own frames, shared by every string with that count', () => {
    // Each string's first character takes its run from the chain of its top frames over the
    // context marker, which stands for what follows the string (its closing quote here).
    const long = { type: 'string', maxLength: 300 };
    const schema = {
      type: 'object',
      properties: {
        a: long,
        b: { type: ['string', 'null'], maxLength: 300 },
        c: { type: 'string', maxLength: 20 },
        d: { type: 'array', items: long },
        e: { type: 'object', properties: { x: long, y: { type: 'string', minLength: 3, maxLength: 140 } } },
        f: { anyOf: [long, { type: 'integer' }] },
      },
      additionalProperties: false,
    };
    const c = compiled({ jsonSchema: schema });
    const prefixes = ['{"a":"', '{"a":"x","b":"', '{"a":"x","b":null,"c":"', '{"c":"abcdefghijklmnopq', '{"d":["', '{"d":["a","', '{"e":{"x":"', '{"e":{"x":"","y":"ab', '{"f":"'];
    let compared = 0;
    prefixes.forEach((p, k) => (compared += compareAlongWalk(c, 800 + k, 8, p)));
    // Grammars where what follows the count takes safe characters ("abc>", "]"): there the cut
    // chain is not the state's (a token may run past the count into them), and where it refuses them (the quote).
    const g = compiled({
      grammar: String.raw`root ::= "<" #"[^\x00-\x1f\"\\\\]{2,5}" "abc>" | "[" #"[^\x00-\x1f\"\\\\]{0,140}" "]" | "(" #"[^\x00-\x1f\"\\\\]{0,140}" "\")" ;`,
    });
    ['<', '<a', '<ab', '[', '[x', '(', '(xy'].forEach((p, k) => (compared += compareAlongWalk(g, 820 + k, 6, p)));
    assert.ok(compared >= 80, `${compared} masks compared`);
  });

  it('where a stack is walked from its top frame alone: objects in counted arrays and in several places', () => {
    // Each element of an array with maxItems is a copy with its own frame under the object: the
    // walk from the top frame is shared by all of them, and tokens that close the object ("}],"
    // and the like) cross that one frame and are walked from deeper cuts.
    const tag = { type: 'object', properties: { key: { type: 'string', pattern: '^[0-9a-zA-Z_-]{1,40}$' }, value: { type: 'string', minLength: 1, maxLength: 60 }, n: { type: 'integer' } }, additionalProperties: false };
    const schema = {
      type: 'object',
      properties: { tags: { type: 'array', items: tag, maxItems: 12 }, one: tag, more: { type: 'array', items: { type: 'array', items: tag, maxItems: 3 } } },
      additionalProperties: false,
    };
    const c = compiled({ jsonSchema: schema });
    const prefixes = ['{"tags":[{"key":"', '{"tags":[{"key":"a","value":"b"},{"key":"', '{"tags":[{"key":"a"},{"key":"ab', '{"tags":[{"key":"a"},{"n":1', '{"one":{"key":"x', '{"more":[[{"key":"a"}],[{"n":', '{"more":[[{"value":"v'];
    let compared = 0;
    prefixes.forEach((p, k) => (compared += compareAlongWalk(c, 900 + k, 10, p)));
    assert.ok(compared >= 60, `${compared} masks compared`);
  });

  it('at the keys of objects with many declared properties', () => {
    const props = (n: number, prefix: string) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}${'x'.repeat(i % 5)}`, i % 3 ? { type: 'string', maxLength: 8 + i } : { type: 'integer' }]));
    const closed = compiled({ jsonSchema: { type: 'object', properties: props(300, 'field'), required: ['field7xx', 'field250'], additionalProperties: false } });
    const open = compiled({ jsonSchema: { type: 'object', properties: { ...props(120, 'k'), ...props(120, 'kk') }, additionalProperties: { type: 'boolean' } } });
    const prefixes = ['{"', '{"field', '{"field1', '{"field7xx":"a","', '{"field7xx":"a","field2', '{"field7xx":"a","field250":'];
    prefixes.forEach((p, k) => compareAlongWalk(closed, 700 + k, 8, p));
    ['{"', '{"k', '{"k1', '{"kk11x":"ab","', '{"kq', '{"k0":0,"other":'].forEach((p, k) => compareAlongWalk(open, 720 + k, 8, p));
  });

  it('while the recognizer grows across transition pages and pair-table doublings', () => {
    // Thousands of states built first, so the walks read rows from many pages of the transition
    // table (64 states a page) and stack nodes interned while the pair table moved its slots.
    const rand = mulberry32(9);
    const words = [...new Set(Array.from({ length: 1500 }, () => Array.from({ length: 2 + Math.floor(rand() * 9) }, () => String.fromCharCode(97 + Math.floor(rand() * 26))).join('')))];
    const c = compiled({ grammar: `root ::= word (" " word)* ;\nword ::= ${words.map((w) => `"${w}"`).join(' | ')} ;` });
    const a = c.automaton;
    for (const w of words.slice(0, 1000)) assert.notStrictEqual(a.run(a.initial, Buffer.from(w)), DEAD);
    assert.ok(a.stateCount > 3000, `${a.stateCount} states`);
    for (let seed = 0; seed < 4; seed++) compareAlongWalk(c, 900 + seed, 25, `${words[seed * 7]} ${words[seed * 11].slice(0, 1)}`);
  });

  it('where one token closes many nesting levels (crossings re-walked down to the whole stack)', () => {
    // Arrays of objects twelve deep: a token such as "}]}]" pops more frames than any cut keeps.
    let inner: object = { type: 'object', properties: { s: { type: 'string' }, n: { type: 'integer' } }, required: ['s'] };
    for (let d = 0; d < 6; d++) inner = { type: 'array', items: { type: 'object', properties: { k: inner }, required: ['k'] } };
    const c = compiled({ jsonSchema: inner });
    const deep = '[{"k":'.repeat(6) + '{"s":"a';
    for (let seed = 0; seed < 6; seed++) compareAlongWalk(c, 200 + seed, 20, deep);
    // Recursive definitions: the same rules at every depth, so cuts agree while the stacks differ.
    const $defs = (randomSchema(3) as { $defs: object }).$defs;
    const tree = compiled({ jsonSchema: { $ref: '#/$defs/tree', $defs } });
    compareAlongWalk(tree, 300, 24, '{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[{"v":4,"kids":[');
  });

  it('where one byte ends many rules at once (a crossing node itself past a deeper cut)', () => {
    // Every level may end right after the one below it, so '>' ends twelve rules in one byte
    // and '>.' is allowed only by the root: its node crosses every cut but the whole stack.
    const levels = Array.from({ length: 12 }, (_, k) => `l${k} ::= l${k + 1} "${String.fromCharCode(0x61 + k)}"? ;`);
    const c = compiled({ grammar: ['root ::= l0 "." ;', ...levels, 'l12 ::= "<" #"[a-z]*" ">" ;'].join('\n') });
    compareAlongWalk(c, 500, 4, '<ab');
  });

  it('for grammars whose strings are not JSON strings', () => {
    const c = compiled({ grammar: 'root ::= item ("," item)* ;\nitem ::= "<" #"[^<>]*" ">" | "\\"" #"[a-z\\u00e0-\\u00ff]*" "\\"" ;' });
    for (let seed = 0; seed < 4; seed++) compareAlongWalk(c, 400 + seed, 20);
  });
});
