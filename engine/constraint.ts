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
  /** The fewest tokens (World ids) that finish the grammar from here; empty when accepting. */
  completionTokens(): number[];
}

export interface CompiledConstraintLike {
  newMatcher(): ConstraintMatcherLike;
  /** Throws (or returns false) when the text does not conform. */
  validateOutput(text: string): unknown;
}

export type ConstraintCompiler = (spec: { grammar?: string; jsonSchema?: object }, tokenizer: unknown) => CompiledConstraintLike;

/** The grammar module's compileConstraint, or null when it is not part of this build. */
export function loadConstraintCompiler(): ConstraintCompiler | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require('./grammar/index') as { compileConstraint?: ConstraintCompiler };
    return typeof mod.compileConstraint === 'function' ? mod.compileConstraint : null;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && /grammar[\\/]index/.test((e as Error).message)) return null;
    throw e;
  }
}
