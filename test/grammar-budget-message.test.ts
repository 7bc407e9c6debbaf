// A grammar that cannot fit a request's token budget is refused before anything is queued. When the request set no
// maxTokens, the budget came from elsewhere (the context limit of a growing state, or the default), and the message
// must say so: "maxTokens 7 is too small" names a value the caller never gave.

import { strict as assert } from 'assert';
import { RwkvEngine } from '../engine/engine';
import type { CompiledConstraintLike } from '../engine/constraint';
import type { GenerateRequest } from '../engine/api';
import { byteTokenizer } from './fake-backend';
import { GrowingFakeBackend } from './growing-fake-backend';

/** A constraint whose shortest output takes `shortest` tokens; it allows every token. */
function constraintNeeding(shortest: number): CompiledConstraintLike {
  return {
    newMatcher: () => ({
      fillMask: (mask) => mask.fill(0xffffffff),
      forcedToken: () => null,
      accept: () => undefined,
      isAccepting: () => false,
      isDone: () => false,
      completionTokens: () => null,
      fits: (budget) => budget >= shortest,
    }),
    validateOutput: () => true,
  };
}

async function firstError(engine: RwkvEngine, req: GenerateRequest): Promise<Error> {
  try {
    for await (const e of engine.generate(req)) void e;
  } catch (e) {
    return e as Error;
  }
  throw new Error('the request was not refused');
}

describe('grammar that does not fit the token budget: the message names what set the budget', () => {
  const maxContext = 20;
  let engine: RwkvEngine;
  beforeEach(() => {
    const backend = new GrowingFakeBackend({ slots: 1, script: () => 1 }, maxContext);
    engine = new RwkvEngine({
      backend,
      tokenizer: byteTokenizer,
      config: { maxTokensLimit: 50 },
      compileConstraint: () => constraintNeeding(100),
    });
  });
  afterEach(() => engine.close());

  it('clamped by the context limit (no maxTokens): names maxContext and the prompt length, not a maxTokens the caller never set', async () => {
    const e = await firstError(engine, { prompt: 'hello', grammar: 'root ::= "x"' });
    assert.match(e.message, /too small/);
    assert.match(e.message, /context limit/);
    assert.match(e.message, /maxContext/);
    assert.match(e.message, /\b20\b/, 'the limit');
    assert.match(e.message, /5 tokens/, 'the prompt length');
    assert.match(e.message, /15/, 'the budget the limit left');
    assert.doesNotMatch(e.message, /^maxTokens 15 is too small/);
  });

  it('a maxTokens the request set is named as before', async () => {
    const e = await firstError(engine, { prompt: 'hello', grammar: 'root ::= "x"', maxTokens: 10 });
    assert.match(e.message, /^maxTokens 10 is too small for this grammar/);
  });

  it('the default budget (no maxTokens, room to spare) says it is the default', async () => {
    const wide = new RwkvEngine({
      backend: new GrowingFakeBackend({ slots: 1, script: () => 1 }, 4096),
      tokenizer: byteTokenizer,
      config: { maxTokensLimit: 50 },
      compileConstraint: () => constraintNeeding(100),
    });
    try {
      const e = await firstError(wide, { prompt: 'hello', grammar: 'root ::= "x"' });
      assert.match(e.message, /too small/);
      assert.match(e.message, /request set no maxTokens/);
      assert.match(e.message, /maxTokensLimit/);
    } finally {
      await wide.close();
    }
  });
});
