// The one rule for tests that need the reference data in ../shared/golden (RWKV_SHARED): with CI set, a missing
// golden file fails the test; elsewhere the test is skipped, saying which file is missing. Either way the run
// ends with "golden tests run: N" (test/root-hooks.ts), so a run whose golden tests silently did not happen
// shows it.

import * as fs from 'fs';
import * as path from 'path';
import { GOLDEN } from './paths';

/** CI=true (GitHub Actions, GitLab, most others), also 1 or yes. */
export function inCI(): boolean {
  return /^(true|1|yes)$/i.test(process.env.CI ?? '');
}

/** Suites (whose hooks asked) and tests that need golden data, and what became of them. */
const needing = new WeakSet<Mocha.Suite | Mocha.Runnable>();
const tally = { ran: 0, skipped: 0, missing: new Set<string>() };

/**
 * Call first thing in the `before` hook (or the test) that reads `files`, with the hook's or test's `this`.
 * Marks the suite (or test) as needing golden data; when a file is missing it throws under CI and skips
 * otherwise.
 */
export function requireGolden(ctx: Mocha.Context, ...files: string[]): void {
  const runnable = ctx.test;
  if (!runnable) throw new Error('requireGolden needs the this of a hook or test');
  // In a hook, the suite it belongs to needs the data; in a test, that test does.
  const scope = (runnable as { type?: string }).type === 'hook' && runnable.parent ? runnable.parent : runnable;
  needing.add(scope);
  const missing = files.filter((f) => !fs.existsSync(f)).map(shortName);
  if (missing.length === 0) return;
  const what = `golden data missing: ${missing.join(', ')} in ${GOLDEN} (set RWKV_SHARED to the folder holding golden/)`;
  if (inCI()) throw new Error(`${what}. With CI set, missing golden data is a failure, not a skip.`);
  for (const f of missing) tally.missing.add(f);
  tally.skipped += scope === runnable ? 1 : countTests(scope as Mocha.Suite);
  console.log(`      (skipped: ${what})`);
  ctx.skip();
}

/** A file's name relative to the golden folder when it lies inside it. */
function shortName(file: string): string {
  const rel = path.relative(GOLDEN, file);
  return rel.startsWith('..') || path.isAbsolute(rel) ? file : rel;
}

function countTests(suite: Mocha.Suite): number {
  return suite.tests.length + suite.suites.reduce((n, s) => n + countTests(s), 0);
}

function needsGolden(test: Mocha.Runnable): boolean {
  for (let at: Mocha.Suite | Mocha.Runnable | undefined = test; at; at = at.parent) if (needing.has(at)) return true;
  return false;
}

/** Called after every test (root hook): counts the golden tests that ran (passed or failed). */
export function recordGoldenTest(test: Mocha.Test | undefined): void {
  if (test && !test.isPending() && needsGolden(test)) tally.ran++;
}

/** The summary line printed at the end of the run. */
export function goldenSummary(): string {
  const skipped = tally.skipped > 0 ? `; ${tally.skipped} skipped, missing ${[...tally.missing].join(', ')} in ${GOLDEN}` : '';
  return `golden tests run: ${tally.ran}${skipped}`;
}
