import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { compileConstraint, ConstraintError } from '../engine/grammar';
import { detectDialect } from '../engine/grammar/grammar-parser';
import { acceptsText } from './grammar-check-text';
import { worldTokenizer } from './grammar-vocab';
import { REPO_ROOT } from './paths';

function grammar(text: string) {
  return compileConstraint({ grammar: text }, worldTokenizer());
}

function refused(text: string, fragments: string[]): ConstraintError {
  let err: unknown;
  try {
    grammar(text);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ConstraintError, `expected a ConstraintError for ${JSON.stringify(text)}, got ${err}`);
  for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
  return err;
}

describe('grammar text (KBNF and GBNF)', function () {
  this.timeout(60000);

  it('recognises the dialect', () => {
    assert.strictEqual(detectDialect("start ::= 'a' | b;\nb ::= \"c\";"), 'kbnf');
    assert.strictEqual(detectDialect('root ::= "a" [b-c]\n# comment;\nx ::= "y"'), 'gbnf');
  });

  it('KBNF: strings, regex, [optional], {repeat}, groups, postfix operators and comments', () => {
    const g = grammar(`
      (* a sentence: greeting, optional name, numbers *)
      start ::= greeting [' ' name] ':' { ' ' number } '!'?;
      greeting ::= 'hello' | "hi";
      name ::= #"[A-Z][a-z]+";
      number ::= #"-?[0-9]+" ( '.' #"[0-9]+" )?;
    `);
    for (const ok of ['hello:', 'hi Bob: 1 2.5 -3!', 'hello Alice:!', 'hi: 42']) assert.ok(acceptsText(g, ok), ok);
    for (const bad of ['hello', 'hey:', 'hi bob:', 'hi: 1.', 'hi:1', 'hello: 1!!']) assert.ok(!acceptsText(g, bad), bad);
  });

  it('KBNF: + and * postfix, nested groups, escapes in strings', () => {
    const g = grammar(`start ::= ('a' | 'b')+ "\\n" ('x' 'y'*)*;`);
    for (const ok of ['a\n', 'abba\nxyyx', 'b\nx']) assert.ok(acceptsText(g, ok), ok);
    for (const bad of ['\n', 'a\ny', 'c\n']) assert.ok(!acceptsText(g, bad), bad);
  });

  it('GBNF: root, character classes, negation, ranges, {m,n}, comments, dot', () => {
    const g = grammar(`
      # a tiny key=value list
      root ::= pair ("," pair){0,2}
      pair ::= key "=" value
      key  ::= [a-z_] [a-z0-9_]{0,7}
      value ::= [0-9]{1,3} | "\\"" [^"\\n]* "\\"" | "." .
    `);
    for (const ok of ['a=1', 'x_1=999,y="héllo wörld 😀",z=2', 'k=.?']) assert.ok(acceptsText(g, ok), ok);
    for (const bad of ['A=1', 'a=1234', 'a=1,b=2,c=3,d=4', 'abcdefghi=1', 'a="x\ny"']) assert.ok(!acceptsText(g, bad), bad);
  });

  it('GBNF: {m}, {m,} and alternatives continued on the next line', () => {
    const g = grammar('root ::= "a"{3} "b"{2,}\n  | "c"');
    for (const ok of ['aaabb', 'aaabbbb', 'c']) assert.ok(acceptsText(g, ok), ok);
    for (const bad of ['aabb', 'aaab', 'cc']) assert.ok(!acceptsText(g, bad), bad);
  });

  it('GBNF: a llama.cpp-style JSON grammar with multi-line rules, empty alternatives and escapes', () => {
    const g = grammar(String.raw`
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
`);
    for (const ok of ['{}', '{"a": [1, 2.5, -3e4, true, null], "b": {"c": "d\\n\\u00e9"}}', '{\n  "k": "v"\n}']) assert.ok(acceptsText(g, ok), ok);
    for (const bad of ['[]', '{"a": }', '{"a": 01}', '{"a": "x"', '{"a": "\u0001"}']) assert.ok(!acceptsText(g, bad), bad);
  });

  it('tolerates right recursion and repetition of something that may be empty', () => {
    const g = grammar('root ::= item*\nitem ::= "x"? "y"?\n');
    assert.ok(acceptsText(g, 'xyyxx'));
    const r = grammar('root ::= "(" root ")" | ""');
    assert.ok(acceptsText(r, '((()))'));
    assert.ok(!acceptsText(r, '(()'));
  });

  it('refuses an undefined rule, naming it and its place', () => {
    const e = refused('root ::= greeting " " nme\ngreeting ::= "hi"\nname ::= [a-z]+', ["'nme'", 'line 1']);
    assert.ok(e.place?.includes('line 1'));
  });

  it('refuses a grammar whose language is empty', () => {
    refused('root ::= "a" loop\nloop ::= "b" loop', ['matches no string']);
    refused('root ::= [^\\x00-\\U0010FFFF]', ['matches no string']);
  });

  it('refuses left recursion, naming the rule', () => {
    refused('root ::= expr\nexpr ::= expr "+" term | term\nterm ::= [0-9]', ["'expr'", 'left-recursive']);
    refused('root ::= a\na ::= b "x" | "y"\nb ::= "" | a "z"', ['left-recursive']);
  });

  it('refuses syntax errors with the line and column', () => {
    refused('root ::= "a" (', ["missing ')'", 'line 1']);
    refused('root ::= "abc', ['unterminated string']);
    refused('root ::= [a-', ["missing ']'"]);
    refused('root = "a"', ["expected '::='"]);
    refused("start ::= 'a'\n   'b'\nx ::= 'c';", ["expected ';'", 'line 3']);
    refused('root ::= "a"{3,1}', ['max below min']);
  });

  it('refuses regex features a grammar cannot express', () => {
    // kbnf reads a regex's escapes as a string's first: \\1 and \\b reach the regex as \1 and \b.
    refused('start ::= #"(a)\\\\1";', ['back-references']);
    refused('start ::= #"a(?=b)";', ['lookaround']);
    refused('start ::= #"\\\\bword";', ['word boundary']);
  });

  it('validateOutput checks the whole text against the grammar', () => {
    const g = grammar('root ::= "yes" | "no"');
    assert.strictEqual(g.validateOutput('yes'), 'yes');
    assert.throws(() => g.validateOutput('ye'), ConstraintError);
    assert.throws(() => g.validateOutput('maybe'), ConstraintError);
  });

  describe("KBNF as kbnf reads it (grammars from kbnf's tests and documentation)", () => {
    const fixture = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test', 'fixtures', 'kbnf-grammars.json'), 'utf8')) as {
      cases: { from: string; grammar: string; accept: string[]; reject: string[] }[];
    };
    for (const c of fixture.cases)
      it(`${c.from}: ${JSON.stringify(c.grammar).slice(0, 60)}`, () => {
        assert.strictEqual(detectDialect(c.grammar), 'kbnf');
        const g = grammar(c.grammar);
        for (const ok of c.accept) assert.ok(acceptsText(g, ok), `should accept ${JSON.stringify(ok)}`);
        for (const bad of c.reject) assert.ok(!acceptsText(g, bad), `should reject ${JSON.stringify(bad)}`);
      });

    it('refuses escapes kbnf refuses, naming how to write a regex class', () => {
      refused('start ::= #"\\d+";', ['unknown escape \\d', '\\\\d', 'line 1']);
      refused("start ::= 'a\\q';", ['unknown escape \\q']);
      refused("start ::= '\\400';", ['above']);
      refused("start ::= '\\u{110000}';", ['not a Unicode scalar value']);
    });

    it('bounds the automata of #e / #ex and the #substrs strings', () => {
      // (a|b)*a(a|b){12}: its deterministic automaton needs 2^13 states, of many parses each.
      refused('start ::= #e"(a|b)*a(a|b){12}";', ['automaton states', '#e']);
      refused('start ::= #e"[a-z]{5000}";', ['automaton states', '4000', '#e']);
      // Each state of this one holds hundreds of parses (one per count): refused by that measure, early.
      refused('start ::= #ex"[^a]{500}";', ['parses in the automaton states', '25000', '#ex']);
      refused(`start ::= #substrs"${'x'.repeat(20001)}";`, ['#substrs', '20000']);
      refused('start ::= #ex"a*" "b";', ['matches the empty text']);
    });
  });

  it('GBNF: escapes as llama.cpp reads them', () => {
    const g = grammar('root ::= "\\x41\\u00e9\\t\\"" [\\[\\]]');
    assert.ok(acceptsText(g, 'Aé\t"['));
    assert.ok(acceptsText(g, 'Aé\t"]'));
    refused('root ::= "a\\q"', ['unknown escape \\q', 'llama.cpp']);
    refused('root ::= "\\f"', ['unknown escape \\f']);
    // A literal may span lines in llama.cpp's parser too.
    assert.ok(acceptsText(grammar('root ::= "a\nb"'), 'a\nb'));
  });
});
