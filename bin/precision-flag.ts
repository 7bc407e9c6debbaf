// The command line's weight precision: --precision P, or --f32 (its older spelling); f16 when neither is given.

import { isPrecision, precisionList, type Precision } from '../engine/precision';

export function cliPrecision(values: { f32?: boolean; precision?: string }): Precision {
  const p = values.precision ?? (values.f32 ? 'f32' : 'f16');
  if (!isPrecision(p)) throw new Error(`--precision must be ${precisionList()}, got '${p}'`);
  if (values.f32 && p !== 'f32') throw new Error(`--f32 and --precision ${p} disagree`);
  return p;
}
