// Hostile constraints (issue #11, item 3) through the path engine.generate() uses: the grammar
// module's worker compilation (loadConstraintCompiler). Per constraint: the worst event-loop
// stall while it compiles (a 5 ms interval probe), the time to its error or to success, and,
// when it compiles, the worst per-token step (mask, forced token, budget check) over a short
// sampled run. No GPU and no engine: the bundled World vocabulary only. Used by the lead's
// `safety` bench section.

import { loadConstraintCompiler, type CompiledConstraintLike } from '../engine/constraint';
import { WorldTokenizer } from '../engine/tokenizer';

type Spec = { grammar?: string; jsonSchema?: object };

const chainGrammar = (n: number) =>
  ['root ::= r0', ...Array.from({ length: n }, (_, i) => `r${i} ::= "a" r${i + 1} | "b"`), `r${n} ::= "c"`].join('\n');
const manyProperties = (n: number) => ({
  type: 'object',
  properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'integer' }])),
});

/** The hostile inputs, then variants just within the limits (these compile). */
export const HOSTILE_CONSTRAINTS: [string, Spec][] = [
  ['schema minItems 100000 (103 bytes)', { jsonSchema: { type: 'array', minItems: 100000 } }],
  ['grammar of 10000 rules', { grammar: chainGrammar(10000) }],
  ['schema of 10000 properties', { jsonSchema: manyProperties(10000) }],
  ['grammar a{1000000}', { grammar: 'root ::= "a"{1000000}' }],
  ['schema minLength 1000000', { jsonSchema: { type: 'string', minLength: 1000000 } }],
  ['within limits: grammar of 4000 rules', { grammar: chainGrammar(4000) }],
  ['within limits: schema of 1000 properties', { jsonSchema: manyProperties(1000) }],
  ['within limits: grammar a{100000}', { grammar: 'root ::= "a"{100000}' }],
  ['within limits: schema minLength 100000', { jsonSchema: { type: 'string', minLength: 100000 } }],
];

/** Largest gap between 5 ms interval ticks while `work` runs, minus the interval. */
async function worstStall<T>(work: () => Promise<T>): Promise<{ value?: T; error?: Error; stallMs: number; ms: number }> {
  let last = performance.now();
  let worst = 0;
  const probe = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 5);
    last = now;
  }, 5);
  const t0 = performance.now();
  try {
    const value = await work();
    return { value, stallMs: Math.max(worst, performance.now() - last - 5), ms: performance.now() - t0 };
  } catch (e) {
    return { error: e as Error, stallMs: Math.max(worst, performance.now() - last - 5), ms: performance.now() - t0 };
  } finally {
    clearInterval(probe);
  }
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Worst time of one decoding step's constraint work (as GenerateTask does it) over `steps` random tokens. */
function worstStepMs(c: CompiledConstraintLike, vocabSize: number, steps: number, budget: number): number {
  const m = c.newMatcher();
  const mask = new Uint32Array((vocabSize + 31) >>> 5);
  const rand = mulberry32(1);
  let worst = 0;
  for (let i = 0; i < steps && !m.isDone(); i++) {
    const t0 = performance.now();
    let id = m.forcedToken();
    if (id === null) {
      mask.fill(0);
      m.fillMask(mask);
      const allowed: number[] = [];
      for (let w = 0; w < mask.length; w++) for (let x = mask[w]; x; x &= x - 1) allowed.push(w * 32 + 31 - Math.clz32(x & -x));
      id = allowed[Math.floor(rand() * allowed.length)];
    }
    if (m.fitsAfter && !m.fitsAfter(id, budget - i - 1)) id = m.completionTokens(budget - i)?.[0] ?? 0;
    worst = Math.max(worst, performance.now() - t0);
    if (id === 0) break;
    m.accept(id);
  }
  return worst;
}

export async function measureConstraintSafety(): Promise<Record<string, unknown>> {
  const compile = loadConstraintCompiler();
  if (!compile) throw new Error('the grammar module is not part of this build');
  const vocab = WorldTokenizer.bundled();
  // The vocabulary's token trie is built once per process on the main thread; measured apart.
  const warm = await worstStall(() => Promise.resolve(compile({ grammar: 'root ::= "warm"' }, vocab)));
  const out: Record<string, unknown> = { vocabularyTrieFirstUse: { ms: round(warm.ms), stallMs: round(warm.stallMs) } };
  for (const [name, spec] of HOSTILE_CONSTRAINTS) {
    const r = await worstStall(() => Promise.resolve(compile(spec, vocab)));
    out[name] = {
      worstStallMs: round(r.stallMs),
      msToResult: round(r.ms),
      ...(r.error ? { error: r.error.message } : { compiled: true, worstTokenStepMs: round(worstStepMs(r.value!, vocab.vocabSize, 32, 256)) }),
    };
  }
  return out;
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}

export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('safety-constraints', () => measureConstraintSafety());
}
