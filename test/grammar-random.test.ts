import * as assert from 'assert';
import { compileConstraint } from '../engine/grammar';
import { randomSchema } from './grammar-random-schemas';
import { sampleConstrained } from './grammar-sampler';
import { worldTokenizer } from './grammar-vocab';

const SCHEMAS = 200;
const MAX_TOKENS = 128;

describe('random generation through the mask', function () {
  this.timeout(600000);

  it(`every output of a random model for ${SCHEMAS} random schemas validates with ajv`, () => {
    const tok = worldTokenizer();
    let completedByBudget = 0, forced = 0, tokens = 0;
    for (let seed = 1; seed <= SCHEMAS; seed++) {
      const schema = randomSchema(seed);
      const c = compileConstraint({ jsonSchema: schema }, tok);
      const run = sampleConstrained(c, tok.vocabSize, { seed, maxTokens: MAX_TOKENS, logitScale: 3, eosBias: 3 });
      assert.ok(run.tokens.length <= MAX_TOKENS, `seed ${seed}: budget exceeded`);
      const text = tok.decode(run.tokens);
      // Throws (failing the test) if the output does not conform.
      assert.doesNotThrow(() => c.validateOutput(text), `seed ${seed}: ${text}`);
      assert.ok(!/\s(?=(?:[^"\\]|\\.)*$)/.test(text.replace(/"(?:[^"\\]|\\.)*"/g, '""')), `seed ${seed}: compact JSON`);
      completedByBudget += run.completed ? 1 : 0;
      forced += run.forcedSteps;
      tokens += run.tokens.length;
    }
    console.log(`      ${SCHEMAS} schemas, ${tokens} tokens (${forced} forced), ${completedByBudget} closed by the shortest completion at the budget`);
  });
});
