// The subgroup-matrix kernels in plain WGSL, for devices without Dawn's chromium_experimental_subgroup_matrix — so
// that CI (Mesa lavapipe) runs and checks the same generated products the H200 runs on its tensor cores. Until this,
// their arithmetic was first checked by the golden check on the H200, and GPU sessions are scarce.
//
// Only for tests and development (RWKV_FLOW_EMULATE_SUBGROUP_MATRIX=1 or DeviceRequest.emulateSubgroupMatrix). A matrix
// is spread over the 32 lanes of a subgroup, as matrix units spread theirs (in a layout of their own, which WGSL does
// not show): lane l owns row m = l / 2 and columns n0 = 8·(l % 2)
// .. n0 + 7 of every result, so it holds the left matrix's row m (16 values), the right matrix's columns n0.. (16 × 8)
// and its 8 results, and a multiply is 128 multiply-adds a lane. What it rewrites in a shader:
// - the types subgroup_matrix_left/right/result<T, 16, 16> become a lane's share: array<f32, 16 / 128 / 8>; f16 values
//   widen exactly to f32, and a product of two f16 values is exact in f32, as on the matrix units (the f32 sums run
//   in k order, theirs in an order of their own);
// - subgroupMatrixLoad / Store on a named module-scope array become generated functions of that array, each lane
//   reading and writing its own share;
// - subgroupMatrixMultiplyAccumulate becomes one function;
// - subgroups of 32 lanes are counted from local_invocation_index (lavapipe's are 8 lanes), and subgroupBroadcastFirst
//   is the identity: the kernels pass it only values uniform within a subgroup (what the matrix operations need).

/** Environment switch for tests and development: run the subgroup-matrix path on any device with shader-f16. */
export const EMULATE_SUBGROUP_MATRIX_ENV = 'RWKV_FLOW_EMULATE_SUBGROUP_MATRIX';

export function emulationRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env[EMULATE_SUBGROUP_MATRIX_ENV];
  return v === '1' || v === 'on' || v === 'true';
}

const emulating = new WeakSet<GPUDevice>();

/** Shaders made on `device` get their subgroup matrices emulated (gpu/kernel.ts makeKernel). */
export function markEmulating(device: GPUDevice): void {
  emulating.add(device);
}

export function isEmulating(device: GPUDevice): boolean {
  return emulating.has(device);
}

/** A lane's share of each kind of matrix. */
const SHARE = { left: 'array<f32, 16>', right: 'array<f32, 128>', result: 'array<f32, 8>' } as const;
const LOAD = /subgroupMatrixLoad<\s*subgroup_matrix_(left|right)<\s*\w+\s*,\s*16\s*,\s*16\s*>\s*,\s*(row|col)_major\s*>\s*\(\s*&\s*(\w+)\s*,\s*/g;
const STORE = /subgroupMatrixStore<\s*(row|col)_major\s*>\s*\(\s*&\s*(\w+)\s*,\s*/g;
const TYPE = /subgroup_matrix_(left|right|result)<\s*\w+\s*,\s*16\s*,\s*16\s*>/g;

/** The element type of module-scope array `name` (`var<…> name: array<T…>`). */
function elementType(src: string, name: string): string {
  const m = new RegExp(`var(?:<[^>]*>)?\\s+${name}\\s*:\\s*array<\\s*(\\w+(?:<\\w+>)?)`).exec(src);
  if (!m) throw new Error(`subgroup-matrix emulation: no module-scope array '${name}' to load from or store to`);
  if (!/^(f16|f32)$/.test(m[1])) throw new Error(`subgroup-matrix emulation: '${name}' holds ${m[1]}, not f16 or f32 scalars`);
  return m[1];
}

/** Element (r, c) of a matrix at `off` with `stride` elements between rows (row-major) or columns (column-major). */
const at = (major: string, r: string, c: string) => (major === 'row' ? `off + (${r}) * stride + ${c}` : `off + (${c}) * stride + ${r}`);

/** The lane's row of a left matrix (its 16 inputs k), or its 8 columns of a right one (k × 8 + j). */
function loadFn(name: string, buf: string, kind: 'left' | 'right', major: string): string {
  const body = kind === 'left'
    ? `  for (var k = 0u; k < sgm_n; k++) { m[k] = f32(${buf}[${at(major, 'sgm_lane / 2u', 'k')}]); }`
    : `  for (var k = 0u; k < sgm_n; k++) { for (var j = 0u; j < 8u; j++) { m[k * 8u + j] = f32(${buf}[${at(major, 'k', '8u * (sgm_lane % 2u) + j')}]); } }`;
  return [`fn ${name}(off: u32, stride: u32) -> ${SHARE[kind]} {`, `  var m: ${SHARE[kind]};`, body, '  return m;', '}'].join('\n');
}

/** The lane's 8 results: row lane / 2, columns 8·(lane % 2) and on. */
function storeFn(name: string, buf: string, major: string, elem: string): string {
  return [
    `fn ${name}(off: u32, m: ${SHARE.result}, stride: u32) {`,
    `  for (var j = 0u; j < 8u; j++) { ${buf}[${at(major, 'sgm_lane / 2u', '8u * (sgm_lane % 2u) + j')}] = ${elem}(m[j]); }`,
    '}',
  ].join('\n');
}

const MMA_FN = [
  `fn sgm_mma(a: ${SHARE.left}, b: ${SHARE.right}, acc: ${SHARE.result}) -> ${SHARE.result} {`,
  '  var out = acc;',
  '  for (var j = 0u; j < 8u; j++) {',
  '    var s = out[j];',
  '    for (var k = 0u; k < sgm_n; k++) { s += a[k] * b[k * 8u + j]; }',
  '    out[j] = s;',
  '  }',
  '  return out;',
  '}',
].join('\n');

/** Where the lane's share comes from: its lane in a 32-lane subgroup, and 16 that no compiler can fold. */
const PRIVATE_DECLS = 'var<private> sgm_n: u32 = 16u;\nvar<private> sgm_lane: u32;';

/** `src` with its subgroup matrices emulated; a shader without any is returned as it is. */
export function emulateSubgroupMatrices(src: string): string {
  if (!src.includes('chromium_experimental_subgroup_matrix')) return src;
  const fns = new Map<string, string>();
  // Comments go first: they name the builtins too.
  let out = src
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/[^\n]*/g, '')
    .replace(/^[ \t]*enable\s+chromium_experimental_subgroup_matrix\s*;[ \t]*$/m, '')
    .replace(/^[ \t]*diagnostic\s*\(\s*off\s*,\s*chromium_experimental\.subgroup_matrix_uniformity\s*\)\s*;[ \t]*$/m, '');
  out = out.replace(LOAD, (_, kind: 'left' | 'right', major: string, buf: string) => {
    const name = `sgm_load_${kind}_${major}_${buf}`;
    if (!fns.has(name)) {
      elementType(src, buf); // loads widen f16 or f32 scalars only
      fns.set(name, loadFn(name, buf, kind, major));
    }
    return `${name}(`;
  });
  out = out.replace(STORE, (_, major: string, buf: string) => {
    const name = `sgm_store_${major}_${buf}`;
    if (!fns.has(name)) fns.set(name, storeFn(name, buf, major, elementType(src, buf)));
    return `${name}(`;
  });
  out = out.replace(/subgroupMatrixMultiplyAccumulate\s*\(/g, 'sgm_mma(').replace(TYPE, (_, kind: keyof typeof SHARE) => SHARE[kind]);
  if (/subgroupMatrix\w*|subgroup_matrix_\w+/.test(out)) {
    throw new Error(`subgroup-matrix emulation: a form it does not rewrite remains: ${/\w*subgroupMatrix\w*[^;\n]*|subgroup_matrix_\w+[^;\n]*/.exec(out)![0]}`);
  }
  out = out.replace(/subgroupBroadcastFirst\s*\(/g, '(');
  // Any other subgroup operation would run on the device's own subgroups, not the emulated 32 lanes.
  const other = /\bsubgroup[A-Z]\w*\s*\(/.exec(out);
  if (other) throw new Error(`subgroup-matrix emulation: ${other[0]}…) would run on the device's subgroups, not 32 lanes`);
  out = emulate32LaneSubgroups(out, runtimeSixteen(out));
  // Nothing of the device's subgroups is used any more: a device without them runs the result too.
  out = out.replace(/^[ \t]*enable\s+subgroups\s*;[ \t]*$/m, '');
  return `${out}\n\n// Subgroup matrices emulated (engine/gpu/subgroup-matrix-emulation.ts).\n${PRIVATE_DECLS}\n${[...fns.values(), MMA_FN].join('\n\n')}\n`;
}

/**
 * The matrices' loops run to sgm_n, 16 set at run time: with a constant bound Mesa's compiler unrolls every loop and
 * turns each matrix into 256 values, and a 4×4-tile product (48 matrices, 64 multiplies a trip) then took minutes
 * and gigabytes to compile on lavapipe. The value comes from a runtime-sized array's length, which no compiler can
 * fold (a binding is never empty, so it is always 16).
 */
function runtimeSixteen(src: string): string {
  const m = /var<storage[^>]*>\s+(\w+)\s*:\s*array<\s*\w+(?:<\s*\w+\s*>)?\s*>\s*;/.exec(src);
  if (!m) throw new Error('subgroup-matrix emulation: the shader has no runtime-sized storage array to size its loops by');
  return `sgm_n = select(16u, 0u, arrayLength(&${m[1]}) == 0u);`;
}

/** Subgroup id and lane of 32-lane subgroups, from the invocation's index in its workgroup; `prologue` runs first. */
function emulate32LaneSubgroups(src: string, prologue: string): string {
  const head = /fn\s+main\s*\(/.exec(src);
  if (!head) throw new Error('subgroup-matrix emulation: the shader has no fn main');
  // The parameter list runs to the parenthesis that closes the one after `main` (attributes hold parentheses too).
  let depth = 1;
  let end = head.index + head[0].length;
  for (; depth > 0 && end < src.length; end++) depth += src[end] === '(' ? 1 : src[end] === ')' ? -1 : 0;
  const brace = src.indexOf('{', end);
  let params = src.slice(head.index + head[0].length, end - 1);
  const builtin = (b: string) => new RegExp(`@builtin\\(\\s*${b}\\s*\\)\\s*(\\w+)\\s*:\\s*u32\\s*,?`);
  const sg = builtin('subgroup_id').exec(params);
  const lane = builtin('subgroup_invocation_id').exec(params);
  if (!sg && !lane) throw new Error('subgroup-matrix emulation: main takes no subgroup_id or subgroup_invocation_id, so its subgroups are not known');
  if (/@builtin\(\s*subgroup_size\s*\)/.test(params)) throw new Error('subgroup-matrix emulation: subgroup_size is not emulated');
  if (sg) params = params.replace(sg[0], '');
  if (lane) params = params.replace(lane[0], '');
  params = params.trim().replace(/,\s*$/, '');
  let lid = /@builtin\(\s*local_invocation_index\s*\)\s*(\w+)\s*:\s*u32/.exec(params)?.[1];
  if (!lid) {
    lid = 'sgm_lid';
    params = `${params}, @builtin(local_invocation_index) ${lid}: u32`;
  }
  const lets = [prologue, `sgm_lane = ${lid} % 32u;`, sg ? `let ${sg[1]} = ${lid} / 32u;` : '', lane ? `let ${lane[1]} = sgm_lane;` : ''].filter(Boolean).join(' ');
  return `${src.slice(0, head.index)}fn main(${params}) {\n  ${lets}${src.slice(brace + 1)}`;
}

