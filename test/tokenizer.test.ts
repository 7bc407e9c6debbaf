import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { StreamDecoder } from '../engine/stream-decoder';
import { bundledVocabPath, VocabFormatError, WorldTokenizer } from '../engine/tokenizer';
import { BUNDLED_VOCAB, GOLDEN } from './paths';

interface GoldenEntry {
  text: string;
  tokens: number[];
}

const golden: GoldenEntry[] = JSON.parse(fs.readFileSync(path.join(GOLDEN, 'tokenizer.json'), 'utf8'));

/** Small seeded PRNG so failures reproduce. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Independent, slow reference: at each position try every length from the longest token down,
 * looking the bytes up in a dictionary of the vocabulary.
 */
class NaiveGreedy {
  private readonly byBytes = new Map<string, number>();
  private maxLen = 0;

  constructor(tok: WorldTokenizer, ids: Iterable<number>) {
    for (const id of ids) {
      const b = tok.tokenBytes(id);
      if (!b) continue;
      this.byBytes.set(Buffer.from(b).toString('latin1'), id);
      this.maxLen = Math.max(this.maxLen, b.length);
    }
  }

  encode(bytes: Uint8Array): number[] {
    const s = Buffer.from(bytes).toString('latin1');
    const out: number[] = [];
    let pos = 0;
    while (pos < s.length) {
      let len = Math.min(this.maxLen, s.length - pos);
      for (; len > 0; len--) {
        const id = this.byBytes.get(s.slice(pos, pos + len));
        if (id !== undefined) {
          out.push(id);
          break;
        }
      }
      if (len === 0) throw new Error(`naive: stuck at ${pos}`);
      pos += len;
    }
    return out;
  }
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const concatBytes = (parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

/** Random byte strings mixing whole vocabulary tokens, text in several scripts and raw bytes. */
function randomBuffer(tok: WorldTokenizer, rand: () => number, pieces: number): Uint8Array {
  const scripts = ['hello world ', 'Привет ', '你好世界，', 'テキスト', '😀🎉👍🏽👨‍👩‍👧', 'مرحبا ', '\n\n\t  ', '{"a": [1, 2]}'];
  const parts: Uint8Array[] = [];
  for (let p = 0; p < pieces; p++) {
    const kind = rand();
    if (kind < 0.5) {
      const b = tok.tokenBytes(1 + Math.floor(rand() * 65529));
      if (b) parts.push(b);
    } else if (kind < 0.8) {
      const s = scripts[Math.floor(rand() * scripts.length)];
      const chars = [...s];
      const from = Math.floor(rand() * chars.length);
      parts.push(new TextEncoder().encode(chars.slice(from, from + 1 + Math.floor(rand() * 6)).join('')));
    } else {
      parts.push(Uint8Array.from({ length: 1 + Math.floor(rand() * 4) }, () => Math.floor(rand() * 256)));
    }
  }
  return concatBytes(parts);
}

describe('WorldTokenizer', function () {
  this.timeout(20000);
  let tok: WorldTokenizer;
  let naive: NaiveGreedy;

  before(() => {
    tok = WorldTokenizer.bundled();
    naive = new NaiveGreedy(tok, range(1, 65529));
  });

  describe('bundled vocabulary', () => {
    it('is found from the compiled module and is the repository copy', () => {
      assert.strictEqual(path.resolve(bundledVocabPath()), path.resolve(BUNDLED_VOCAB));
    });

    it('bundled() is a cached singleton', () => {
      assert.strictEqual(WorldTokenizer.bundled(), tok);
    });

    it('has 65529 tokens, ids 1..65529, vocabSize 65536', () => {
      assert.strictEqual(tok.vocabSize, 65536);
      let count = 0;
      for (let id = 0; id < 70000; id++) if (tok.tokenBytes(id)) count++;
      assert.strictEqual(count, 65529);
      assert.ok(tok.tokenBytes(1) && tok.tokenBytes(65529));
    });

    it('has every single byte as a token (ids 1..256 are bytes 0..255)', () => {
      for (let b = 0; b < 256; b++) assert.deepStrictEqual([...tok.tokenBytes(b + 1)!], [b]);
    });

    it('parses escaped and non-ASCII literals to the right bytes', () => {
      assert.strictEqual(Buffer.from(tok.tokenBytes(261)!).toString('latin1'), '\n\n');
      assert.strictEqual(Buffer.from(tok.tokenBytes(9810)!).toString('hex'), 'e2808d'); // '\u200d'
      assert.strictEqual(Buffer.from(tok.tokenBytes(65529)!).toString(), ' '.repeat(128));
      assert.strictEqual(Buffer.from(tok.tokenBytes(10464)!).toString(), '你');
    });
  });

  describe('encode', () => {
    for (const entry of golden) {
      it(`matches the reference for ${JSON.stringify(entry.text).slice(0, 50)}`, () => {
        assert.deepStrictEqual(tok.encode(entry.text), entry.tokens);
        assert.deepStrictEqual(tok.encode(new TextEncoder().encode(entry.text)), entry.tokens);
        assert.strictEqual(tok.decode(entry.tokens), entry.text);
      });
    }

    it('agrees with a naive greedy longest match on random mixed input', () => {
      const rand = rng(1);
      for (let round = 0; round < 200; round++) {
        const buf = randomBuffer(tok, rand, 1 + Math.floor(rand() * 60));
        assert.deepStrictEqual(tok.encode(buf), naive.encode(buf), `round ${round}: ${Buffer.from(buf).toString('hex')}`);
      }
    });

    it('takes the longest token, including the longest in the vocabulary', () => {
      assert.deepStrictEqual(tok.encode(' '.repeat(128)), [65529]);
      assert.deepStrictEqual(tok.encode(' '.repeat(129)), [65529, 33]);
      assert.deepStrictEqual(tok.encode('-'.repeat(80)), [65528]);
    });

    it('round-trips arbitrary bytes, invalid UTF-8 included, and never emits id 0', () => {
      const rand = rng(2);
      for (let round = 0; round < 500; round++) {
        const len = Math.floor(rand() * 300);
        // Bias towards UTF-8 lead/continuation bytes so broken sequences are common.
        const buf = Uint8Array.from({ length: len }, () =>
          rand() < 0.5 ? 0x80 + Math.floor(rand() * 0x80) : Math.floor(rand() * 256),
        );
        const ids = tok.encode(buf);
        assert.ok(!ids.includes(0));
        assert.deepStrictEqual(tok.decodeBytes(ids), buf);
        assert.strictEqual(tok.decode(ids), new TextDecoder('utf-8', { ignoreBOM: true }).decode(buf));
      }
    });

    it('encodes the empty string and empty bytes to no tokens', () => {
      assert.deepStrictEqual(tok.encode(''), []);
      assert.deepStrictEqual(tok.encode(new Uint8Array(0)), []);
    });

    it('encodes a lone surrogate in a string as U+FFFD (the UTF-8 encoder replaces it)', () => {
      assert.deepStrictEqual(tok.decodeBytes(tok.encode('a\ud800b')), new TextEncoder().encode('a\ufffdb'));
    });

    it('rejects input that is neither string nor bytes', () => {
      assert.throws(() => tok.encode([1, 2] as unknown as string), /encode expects a string or Uint8Array, got array/);
      assert.throws(() => tok.encode(undefined as unknown as string), /got undefined/);
    });
  });

  describe('decode', () => {
    it('keeps a leading byte order mark', () => {
      assert.strictEqual(tok.decode(tok.encode('\ufeffhi')), '\ufeffhi');
    });

    it('turns invalid UTF-8 into U+FFFD', () => {
      assert.strictEqual(tok.decode([0xe4 + 1, 98]), '\ufffda'); // lone lead byte, then 'a'
    });

    it('throws on ids outside the vocabulary, naming them', () => {
      assert.throws(() => tok.decode([98, 0]), /id 0 \(index 1\) is end of text/);
      assert.throws(() => tok.decode([65530]), /id 65530 \(index 0\) is not in this vocabulary/);
      assert.throws(() => tok.decodeBytes([-1]), /id -1/);
      assert.throws(() => tok.decodeBytes([1.5]), /id 1.5/);
    });

    it('accepts typed arrays of ids', () => {
      assert.strictEqual(tok.decode(Int32Array.from(golden[0].tokens)), golden[0].text);
    });
  });

  describe('tokenBytes', () => {
    it('is undefined for id 0, unused and invalid ids', () => {
      for (const id of [0, 65530, 65535, 65536, 1e9, -1, 2.5, NaN]) assert.strictEqual(tok.tokenBytes(id), undefined);
    });

    it('returns a copy that callers may change', () => {
      const b = tok.tokenBytes(98)!;
      b[0] = 0;
      assert.deepStrictEqual([...tok.tokenBytes(98)!], [0x61]);
    });
  });

  describe('StreamDecoder', () => {
    /** Feed tokens one by one; check no chunk splits a character and the whole equals decode(). */
    function streamed(ids: number[]): string[] {
      const sd = new StreamDecoder(tok);
      const chunks = ids.map((id) => sd.push([id]));
      chunks.push(sd.flush());
      return chunks;
    }

    const isWellFormed = (s: string) => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);

    it('holds partial CJK and emoji bytes until the character is complete', () => {
      const text = '你好，世界。emoji 😀🎉👍🏽 ZWJ 👨‍👩‍👧 Ünïcödé';
      const ids = tok.encode(text);
      // The emoji are split over several byte tokens, so some pushes must release nothing.
      const chunks = streamed(ids);
      assert.ok(chunks.slice(0, -1).some((c) => c === ''), 'expected some tokens to end mid-character');
      assert.strictEqual(chunks.join(''), text);
      for (const c of chunks) {
        assert.ok(isWellFormed(c), `chunk ${JSON.stringify(c)} splits a character`);
        assert.ok(!c.includes('\ufffd'), `chunk ${JSON.stringify(c)} has a replacement character`);
      }
    });

    it('emits a 4-byte character only once all of its byte tokens arrived', () => {
      const sd = new StreamDecoder(tok);
      const bytes = new TextEncoder().encode('😀');
      const out = [...bytes].map((b) => sd.push([b + 1]));
      assert.deepStrictEqual(out, ['', '', '', '😀']);
      assert.strictEqual(sd.flush(), '');
    });

    it('matches decode() on every golden text and on random bytes, pushed in random groups', () => {
      const rand = rng(3);
      const inputs: Uint8Array[] = golden.map((g) => new TextEncoder().encode(g.text));
      for (let i = 0; i < 200; i++) inputs.push(randomBuffer(tok, rand, 1 + Math.floor(rand() * 30)));
      for (const buf of inputs) {
        const ids = tok.encode(buf);
        const sd = new StreamDecoder(tok);
        let text = '';
        for (let at = 0; at < ids.length; ) {
          const n = 1 + Math.floor(rand() * 3);
          const chunk = sd.push(ids.slice(at, at + n));
          assert.ok(isWellFormed(chunk));
          text += chunk;
          at += n;
        }
        text += sd.flush();
        assert.strictEqual(text, tok.decode(ids));
      }
    });

    it('flush() releases an unfinished character as U+FFFD and starts afresh', () => {
      const sd = new StreamDecoder(tok);
      assert.strictEqual(sd.push([0xe4 + 1, 0xbd + 1]), ''); // first 2 bytes of 你
      assert.strictEqual(sd.flush(), '\ufffd');
      assert.strictEqual(sd.push(tok.encode('ok')), 'ok');
      assert.strictEqual(sd.flush(), '');
    });

    it('throws on ids outside the vocabulary', () => {
      assert.throws(() => new StreamDecoder(tok).push([0]), /end of text/);
    });
  });

  describe('restrict', () => {
    it('with only the byte tokens, encodes every byte as its own token', () => {
      const bytesOnly = tok.restrict(range(1, 256));
      assert.strictEqual(bytesOnly.vocabSize, 65536);
      const buf = new TextEncoder().encode('Hello, 世界 😀');
      assert.deepStrictEqual(bytesOnly.encode(buf), [...buf].map((b) => b + 1));
      assert.strictEqual(bytesOnly.decode(bytesOnly.encode('Hello, 世界 😀')), 'Hello, 世界 😀');
    });

    it('uses only the allowed ids and agrees with a naive greedy match over them', () => {
      const rand = rng(4);
      const allowed = range(1, 256);
      for (let id = 257; id <= 65529; id++) if (rand() < 0.3) allowed.push(id);
      const restricted = tok.restrict(allowed);
      const allowedSet = new Set(allowed);
      const naiveRestricted = new NaiveGreedy(tok, allowed);
      for (let round = 0; round < 100; round++) {
        const buf = randomBuffer(tok, rand, 1 + Math.floor(rand() * 40));
        const ids = restricted.encode(buf);
        assert.ok(ids.every((id) => allowedSet.has(id)));
        assert.deepStrictEqual(ids, naiveRestricted.encode(buf));
        assert.deepStrictEqual(restricted.decodeBytes(ids), buf);
      }
    });

    it('forgets disallowed ids for tokenBytes and decode', () => {
      const r = tok.restrict([98, 99]);
      assert.deepStrictEqual([...r.tokenBytes(98)!], [0x61]);
      assert.strictEqual(r.tokenBytes(100), undefined);
      assert.throws(() => r.decode([100]), /id 100 \(index 0\) is not in this vocabulary/);
      assert.deepStrictEqual(r.encode('abba'), [98, 99, 99, 98]);
    });

    it('throws at encode time naming a byte no allowed token starts with', () => {
      const noZ = tok.restrict(range(1, 256).filter((id) => id !== 0x7a + 1));
      assert.deepStrictEqual(noZ.encode('abc'), [98, 99, 100]);
      assert.throws(() => noZ.encode('quiz'), /cannot encode byte 0x7a at byte offset 3/);
    });

    it('rejects ids that are not in the vocabulary', () => {
      assert.throws(() => tok.restrict([98, 0]), /restrict: allowed id 0 \(index 1\)/);
      assert.throws(() => tok.restrict([70000]), /restrict: allowed id 70000 \(index 0\) is not in this vocabulary/);
      assert.throws(() => tok.restrict([98]).restrict([99]), /id 99/);
      assert.throws(() => tok.restrict([]), /no token ids allowed/);
    });
  });

  describe('vocabulary files', () => {
    const fails = (text: string, pattern: RegExp) =>
      assert.throws(
        () => WorldTokenizer.fromText(text, 'test.txt'),
        (e: unknown) => e instanceof VocabFormatError && pattern.test(e.message),
      );

    it('reads a small file with CRLF line ends, str and bytes literals', () => {
      const t = WorldTokenizer.fromText("1 'a' 1\r\n2 b'\\xe4' 1\r\n3 'ab' 2\r\n4 \"'\" 1\r\n\r\n");
      assert.strictEqual(t.vocabSize, 64);
      assert.deepStrictEqual(t.encode("aab'"), [1, 3, 4]);
      assert.deepStrictEqual([...t.tokenBytes(2)!], [0xe4]);
    });

    it('names the line of a malformed entry', () => {
      fails("1 'a' 1\nx 'b' 1\n", /^test\.txt line 2: expected "<id> <python str or bytes literal> <byte length>"/);
      fails("1 'a' 1\n2 'b 1\n", /^test\.txt line 2: bad token literal: unterminated literal/);
      fails("1 'a' 1\n2 '\\x4' 1\n", /line 2: bad token literal: truncated \\x escape/);
      fails("1 'a' 1\n\n3 'é' 1\n", /line 3: token 3 is 2 bytes but the line says 1/);
      fails("1 'a' 1\n1 'b' 1\n", /line 2: id 1 was already defined on line 1/);
      fails("0 'a' 1\n", /line 1: id 0 is reserved for end of text/);
      fails("1 'a' 1 extra\n", /line 1: expected " <byte length>" after the literal/);
      fails("1 'a'\n", /line 1: expected " <byte length>" after the literal/);
      fails("1 b'é' 2\n", /line 1: bad token literal: bytes literal may only contain ASCII/);
      fails("1 '' 0\n", /line 1: token 1 is empty/);
      fails('\n\n', /no tokens in the file/);
    });

    it('reports invalid UTF-8 in a file with its line', () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vocab-'));
      const file = path.join(dir, 'bad.txt');
      try {
        fs.writeFileSync(file, Buffer.concat([Buffer.from("1 'a' 1\n2 '"), Buffer.from([0xff]), Buffer.from("' 1\n")]));
        assert.throws(
          () => WorldTokenizer.fromFile(file),
          (e: unknown) => e instanceof VocabFormatError && e.line === 2 && /bad\.txt line 2: file is not valid UTF-8/.test(e.message),
        );
        fs.writeFileSync(file, "5 'hi' 2\n");
        assert.deepStrictEqual(WorldTokenizer.fromFile(file).encode('hihi'), [5, 5]);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
