import * as assert from 'assert';
import { parsePythonLiteral, PythonLiteralError } from '../engine/python-literal';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('parsePythonLiteral', () => {
  // Expected bytes are what CPython 3 gives for ast.literal_eval(src), UTF-8 encoded for str.
  const cases: [string, string][] = [
    ["'abc'", '616263'],
    [`"a'b"`, '612762'],
    ["'a\\'b'", '612762'],
    ["'\\\\'", '5c'],
    ["'\\a\\b\\f\\n\\r\\t\\v'", '07080c0a0d090b'],
    ["'\\0\\12\\101\\777'", '000a41c7bf'],
    ["'\\x00\\xff'", '00c3bf'],
    ["'\\u00e9\\u4e2d'", 'c3a9e4b8ad'],
    ["'\\U0001F600'", 'f09f9880'],
    ["'\\q\\d'", '5c715c64'],
    ["b'\\xe4\\xb8'", 'e4b8'],
    ["b'\\u00e9'", '5c7530306539'],
    ["b'\\101\\0'", '4100'],
    ["r'\\n\\''", '5c6e5c27'],
    ["rb'\\x41'", '5c783431'],
    ["'''a'b'''", '612762'],
    ['"""x"y"""', '782279'],
    ["'中文'", 'e4b8ade69687'],
    ["'😀'", 'f09f9880'],
    ["B'A'", '41'],
    ["u'\\t'", '09'],
    ["'a\\\nb'", '6162'],
    ["''", ''],
  ];
  for (const [src, expected] of cases) {
    it(`parses ${JSON.stringify(src)}`, () => {
      const r = parsePythonLiteral(src);
      assert.strictEqual(hex(r.bytes), expected);
      assert.strictEqual(r.end, src.length);
      assert.strictEqual(r.isBytes, /^[rR]?[bB]/.test(src));
    });
  }

  it('starts at an offset and reports where the literal ends', () => {
    const line = "42 'a b' 3";
    const r = parsePythonLiteral(line, 3);
    assert.strictEqual(hex(r.bytes), '612062');
    assert.strictEqual(line.slice(r.end), ' 3');
  });

  const errors: [string, RegExp][] = [
    ["'abc", /unterminated/],
    ["'abc\\", /unterminated/],
    ['abc', /unsupported string prefix/],
    ['42', /expected a quote/],
    ['', /end of text/],
    ["f'x'", /unsupported string prefix 'f'/],
    ["'\\x4'", /truncated \\x escape/],
    ["'\\u12'", /truncated \\u escape/],
    ["'\\U0011ffff'", /beyond the last Unicode code point/],
    ["'\\ud800'", /lone surrogate U\+D800/],
    ["b'é'", /only contain ASCII/],
    ["b'\\777'", /out of range for a byte/],
    ["'\\N{BULLET}'", /\\N\{name\} escapes are not supported/],
    ["'a\nb'", /line break inside/],
  ];
  for (const [src, message] of errors) {
    it(`rejects ${JSON.stringify(src)}`, () => {
      assert.throws(
        () => parsePythonLiteral(src),
        (e: unknown) => e instanceof PythonLiteralError && message.test(e.message) && /column \d+/.test(e.message),
      );
    });
  }
});
