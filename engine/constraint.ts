// The engine's view of grammar / JSON-schema constraints (implemented in ./grammar). Typed here
// structurally and loaded lazily, so the runtime builds and runs without the grammar module and
// refuses constrained requests with a clear error instead.

export interface ConstraintMatcherLike {
  /** Set bit id (over World ids) for every token allowed next. */
  fillMask(mask: Uint32Array): void;
  /** The only token allowed next, if there is exactly one. */
  forcedToken(): number | null;
  accept(token: number): void;
  isAccepting(): boolean;
  isDone(): boolean;
  /**
   * The fewest tokens (World ids) that finish the grammar from here; empty when accepting; null
   * when that takes more than `limit` tokens.
   */
  completionTokens(limit?: number): number[] | null;
  /** The output can still be closed within `budget` tokens from here. */
  fits?(budget: number): boolean;
  /** After `token`, the output could still be closed within `budget` tokens (the matcher does not move). */
  fitsAfter?(token: number, budget: number): boolean;
}

export interface CompiledConstraintLike {
  newMatcher(): ConstraintMatcherLike;
  /** Throws (or returns false) when the text does not conform. */
  validateOutput(text: string): unknown;
}

/** Compiles a constraint: in this thread (returns it) or off it (returns a promise). */
export type ConstraintCompiler = (
  spec: { grammar?: string; jsonSchema?: object; jsonWhitespace?: 'compact' | 'flexible' },
  tokenizer: unknown,
) => CompiledConstraintLike | Promise<CompiledConstraintLike>;

/**
 * The grammar module's compileConstraintAsync (compiles in a worker thread, bounded in time and
 * memory), or null when the module is not part of this build.
 */
export function loadConstraintCompiler(): ConstraintCompiler | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require('./grammar/index') as { compileConstraintAsync?: ConstraintCompiler };
    return typeof mod.compileConstraintAsync === 'function' ? mod.compileConstraintAsync : null;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && /grammar[\\/]index/.test((e as Error).message)) return null;
    throw e;
  }
}

/** Prepares the grammar module's per-vocabulary tables at model load, when the module is part of this build. */
export function prepareConstraintVocabulary(tokenizer: unknown): void {
  if (!loadConstraintCompiler()) return;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (require('./grammar/index') as { prepareVocabulary(v: unknown): void }).prepareVocabulary(tokenizer);
}
