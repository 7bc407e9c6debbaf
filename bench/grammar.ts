// Constrained-decoding cost on this CPU: compile time of a mid-size JSON schema against the
// World vocabulary (first compile in the process, and again with the code warm), and fillMask
// time per decoding step while sampling documents with random logits (cold automaton states
// included, as a fresh deployment would see them).
// Targets (issue): median <= 100 us, p99 <= 2 ms per mask, compile <= 200 ms.

import { compileConstraint } from '../engine/grammar';
import { TokenTrie } from '../engine/grammar/token-trie';
import { WorldTokenizer } from '../engine/tokenizer';
import { sampleConstrained } from '../test/grammar-sampler';

export const MID_SIZE_SCHEMA = {
  type: 'object',
  properties: {
    orderId: { type: 'string', format: 'uuid' },
    createdAt: { type: 'string', format: 'date-time' },
    status: { enum: ['pending', 'paid', 'shipped', 'cancelled'] },
    customer: {
      type: 'object',
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 40 },
        email: { type: 'string', format: 'email' },
        age: { type: 'integer', minimum: 18, maximum: 120 },
        vip: { type: 'boolean' },
      },
      required: ['name', 'email'],
      additionalProperties: false,
    },
    items: {
      type: 'array',
      minItems: 1,
      maxItems: 5,
      items: {
        type: 'object',
        properties: {
          sku: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{4}$' },
          quantity: { type: 'integer', minimum: 1, maximum: 99 },
          price: { type: 'number', minimum: 0 },
          note: { type: ['string', 'null'], maxLength: 60 },
        },
        required: ['sku', 'quantity', 'price'],
        additionalProperties: false,
      },
    },
    shipping: {
      anyOf: [
        { type: 'object', properties: { method: { const: 'pickup' }, store: { type: 'string', maxLength: 30 } }, required: ['method', 'store'], additionalProperties: false },
        { type: 'object', properties: { method: { const: 'post' }, address: { $ref: '#/$defs/address' } }, required: ['method', 'address'], additionalProperties: false },
      ],
    },
    tags: { type: 'array', items: { type: 'string', maxLength: 20 }, maxItems: 8 },
  },
  required: ['orderId', 'createdAt', 'status', 'customer', 'items'],
  additionalProperties: false,
  $defs: {
    address: {
      type: 'object',
      properties: { street: { type: 'string', maxLength: 50 }, city: { type: 'string', maxLength: 30 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
      required: ['street', 'city', 'zip'],
      additionalProperties: false,
    },
  },
};

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function benchGrammar(): Promise<Record<string, number>> {
  const tokenizer = WorldTokenizer.bundled();
  let t = performance.now();
  TokenTrie.of(tokenizer);
  const trieMs = performance.now() - t;
  t = performance.now();
  const compiled = compileConstraint({ jsonSchema: MID_SIZE_SCHEMA }, tokenizer);
  const compileMs = performance.now() - t;
  // Again with the code warm (a changed title defeats the compiled-constraint cache).
  t = performance.now();
  compileConstraint({ jsonSchema: { ...MID_SIZE_SCHEMA, title: 'order' } }, tokenizer);
  const compileWarmMs = performance.now() - t;

  const masks: number[] = [];
  let tokens = 0, forced = 0;
  const docs = 24;
  const t1 = performance.now();
  for (let seed = 1; seed <= docs; seed++) {
    const run = sampleConstrained(compiled, tokenizer.vocabSize, { seed, maxTokens: 400, logitScale: 3, eosBias: 4 });
    compiled.validateOutput(tokenizer.decode(run.tokens));
    masks.push(...run.maskMicros);
    tokens += run.tokens.length;
    forced += run.forcedSteps;
  }
  const decodeMs = performance.now() - t1;
  masks.sort((a, b) => a - b);
  const result = {
    vocabTrieMs: trieMs,
    compileMs,
    compileWarmMs,
    maskMedianUs: percentile(masks, 50),
    maskP99Us: percentile(masks, 99),
    maskMaxUs: masks[masks.length - 1],
    maskSteps: masks.length,
    tokens,
    forcedTokens: forced,
    automatonStates: compiled.stateCount,
    docsPerSecond: docs / (decodeMs / 1000),
  };
  for (const [k, v] of Object.entries(result)) console.log(`grammar ${k}: ${Number.isInteger(v) ? v : v.toFixed(1)}`);
  return result;
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('grammar', () => benchGrammar());
}

if (require.main === module) {
  benchGrammar().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
