// `npm run bench -- --sections safety`: what a hostile caller can cost the process, measured.
// - constraints: the worst event-loop stall while each hostile grammar / schema compiles, and its time to refusal;
// - loader: time and peak RSS to refuse each class of crafted model file (each in a child process);
// - reloads: RSS after 50 engine reloads (acquire + release of the shared engine) against after 1.
// The parts live beside this file, one per concern; this section only runs them together.

import { measureConstraintSafety } from './safety-constraints';
import { measureLoaderSafety } from './safety-loader';
import { measureReloadSafety } from './safety-reloads';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

export async function benchSafety(): Promise<Record<string, unknown>> {
  const reloads = Number(arg('reloads') ?? 50);
  return {
    constraints: await measureConstraintSafety(),
    loader: await measureLoaderSafety(),
    reloads: await measureReloadSafety({ reloads }),
  };
}

export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('safety', () => benchSafety());
}
