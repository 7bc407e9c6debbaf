// The command line's weight precision: --precision P, or --f32 (its older spelling); f16 when neither is given.
// --quant-layers N (int8 and nf4): quantise only the first N layers; 0 or absent = all.

import { checkQuantLayers, isPrecision, precisionList, type Precision } from '../engine/precision';

export function cliPrecision(values: { f32?: boolean; precision?: string }): Precision {
  const p = values.precision ?? (values.f32 ? 'f32' : 'f16');
  if (!isPrecision(p)) throw new Error(`--precision must be ${precisionList()}, got '${p}'`);
  if (values.f32 && p !== 'f32') throw new Error(`--f32 and --precision ${p} disagree`);
  return p;
}

/** --quant-layers as a number, unchecked against a precision (undefined when absent). */
export function quantLayersFlag(values: { 'quant-layers'?: string }): number | undefined {
  const v = values['quant-layers'];
  if (v === undefined) return undefined;
  const n = /^\d+$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n)) throw new Error(`--quant-layers must be an integer >= 0 (layers quantised, from the first; 0 = all), got '${v}'`);
  return n;
}

/** --quant-layers checked against the precision; the model's layer count bounds it when the model loads. */
export function cliQuantLayers(values: { 'quant-layers'?: string }, precision: Precision): number | undefined {
  const n = quantLayersFlag(values);
  if (n === undefined) return undefined;
  try {
    return checkQuantLayers(n, precision);
  } catch (e) {
    throw new Error(`--quant-layers: ${(e as Error).message}`);
  }
}
