// Which licences the default model's training text may carry. The weights are shipped under the
// package's own licence (Apache-2.0), so every text they are trained on must be public domain or
// under a permissive licence that allows that; copyleft texts (GPL, GFDL, CC-BY-SA) are refused.
//
// A source's licence is an SPDX-style expression as Debian's copyright file states it:
// `A OR B` when the copyright file offers a choice (allowed when one choice is allowed),
// `A AND B` when parts of the texts differ (allowed when every part is allowed). No parentheses.

/** Licences a training text may carry (SPDX ids; `public-domain` for texts nobody holds a copyright on). */
export const PERMISSIVE_LICENCES: readonly string[] = [
  'public-domain',
  'PSF-2.0',
  'PostgreSQL',
  'MIT',
  'BSD-2-Clause',
  'BSD-3-Clause',
  'Apache-2.0',
  'Apache-2.0 WITH LLVM-exception',
  'CC-BY-3.0',
  'CC-BY-4.0',
];

/** The expression's alternatives (OR), each a list of terms that all apply (AND). */
export function licenceAlternatives(expression: string): string[][] {
  if (/[()]/.test(expression)) throw new Error(`licence expression "${expression}": parentheses are not supported`);
  const alternatives = expression.split(/\s+OR\s+/).map((alt) => alt.split(/\s+AND\s+/).map((t) => t.trim()));
  if (alternatives.some((alt) => alt.some((t) => t === ''))) throw new Error(`licence expression "${expression}" has an empty term`);
  return alternatives;
}

/** True when one alternative of the expression consists of allowed licences only (false when malformed). */
export function isPermissive(expression: string): boolean {
  let alternatives: string[][];
  try {
    alternatives = licenceAlternatives(expression);
  } catch {
    return false;
  }
  return alternatives.some((alt) => alt.every((term) => PERMISSIVE_LICENCES.includes(term)));
}
