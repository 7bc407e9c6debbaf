// Which family of matrix kernels a device can run, decided once from what its adapter offers.
//
//   'subgroup-matrix'  f16 weights multiplied on the matrix units (tensor cores) through Dawn's experimental
//                      subgroup matrices: f16 inputs, f32 accumulation. Needs shader-f16, subgroups of
//                      exactly 32 lanes and an f16×f16→f32 16×16×16 configuration.
//   'f16'              weights read as native f16 (shader-f16), arithmetic in f32: the same numbers as 'f32'.
//   'f32'              no f16 in shaders at all: f16 weights are unpacked from u32 words, arithmetic in f32.
//
// Each path is a superset of the one below it. By default a device runs the best path it has, except that a CPU
// driver (Mesa lavapipe/llvmpipe, SwiftShader) runs 'f32': f16 gains it nothing and its compiler takes ~30 s per
// f16 matrix kernel (seen on lavapipe, Mesa 25.0). An operator (RWKV_FLOW_KERNEL_PATH) or a caller can ask for a
// path by name instead; asking for one the device cannot run is an error that says why.

export type KernelPath = 'subgroup-matrix' | 'f16' | 'f32';

/** Best first. */
export const KERNEL_PATHS: readonly KernelPath[] = ['subgroup-matrix', 'f16', 'f32'];

/** Environment variable an operator sets to choose the kernel path (e.g. `f32` to rule out f16 arithmetic). */
export const KERNEL_PATH_ENV = 'RWKV_FLOW_KERNEL_PATH';

/** The subgroup-matrix shape the kernels are written for (M tokens × N outputs × K inputs per product). */
export const SUBGROUP_MATRIX_SHAPE = { M: 16, N: 16, K: 16 } as const;

/** What the decision reads from an adapter (GPUAdapter's features and info, as plain data). */
export interface AdapterCapabilities {
  features: ReadonlySet<string>;
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
  /** adapter.info.subgroupMatrixConfigs (present only with Dawn's allow_unsafe_apis). */
  subgroupMatrixConfigs?: readonly { componentType: string; resultComponentType: string; M: number; N: number; K: number }[];
  /** The adapter is a CPU driver. */
  cpuDriver?: boolean;
}

/** CPU drivers by their adapter names (Dawn reports no adapter type through `webgpu`). */
export function isCpuDriverName(name: string): boolean {
  return /llvmpipe|lavapipe|swiftshader/i.test(name);
}

export const SUBGROUP_MATRIX_FEATURE = 'chromium-experimental-subgroup-matrix';

export function parseKernelPath(value: string, where: string): KernelPath {
  if ((KERNEL_PATHS as readonly string[]).includes(value)) return value as KernelPath;
  throw new RangeError(`${where}: unknown kernel path '${value}'; expected one of ${KERNEL_PATHS.join(', ')}`);
}

/** Subgroups are exactly 32 lanes (the matrix kernels assume 32-lane subgroups). */
export function hasSubgroups32(a: AdapterCapabilities): boolean {
  return a.features.has('subgroups') && a.subgroupMinSize === 32 && a.subgroupMaxSize === 32;
}

/** True when the adapter offers what the subgroup-matrix kernels need, configuration included. */
export function supportsSubgroupMatrix(a: AdapterCapabilities): boolean {
  if (!a.features.has(SUBGROUP_MATRIX_FEATURE) || !a.features.has('shader-f16') || !hasSubgroups32(a)) return false;
  const { M, N, K } = SUBGROUP_MATRIX_SHAPE;
  return (a.subgroupMatrixConfigs ?? []).some(
    (c) => c.componentType === 'f16' && c.resultComponentType === 'f32' && c.M === M && c.N === N && c.K === K,
  );
}

/**
 * Whether it is worth asking Dawn for its unsafe APIs to look for subgroup matrices: only when the adapter
 * already has everything else the subgroup-matrix kernels need (a CPU driver or a GPU without f16 never does).
 */
export function mayOfferSubgroupMatrix(a: AdapterCapabilities): boolean {
  return a.features.has('shader-f16') && hasSubgroups32(a);
}

/** Why the adapter cannot run a path, or null when it can. */
export function missingFor(a: AdapterCapabilities, path: KernelPath): string | null {
  if (path === 'f32') return null;
  if (!a.features.has('shader-f16')) return 'the adapter has no shader-f16';
  if (path === 'f16' || supportsSubgroupMatrix(a)) return null;
  if (!a.features.has(SUBGROUP_MATRIX_FEATURE)) return `the adapter has no ${SUBGROUP_MATRIX_FEATURE}`;
  if (!hasSubgroups32(a)) return `its subgroups are not exactly 32 lanes (${a.subgroupMinSize}..${a.subgroupMaxSize})`;
  const { M, N, K } = SUBGROUP_MATRIX_SHAPE;
  return `it offers no f16×f16→f32 ${M}×${N}×${K} subgroup-matrix configuration`;
}

/** The path a device runs: the one asked for (an error if the adapter cannot), else the best it has. */
export function chooseKernelPath(a: AdapterCapabilities, wanted?: KernelPath): KernelPath {
  if (wanted) {
    const why = missingFor(a, wanted);
    if (why) throw new Error(`kernel path '${wanted}' is not available on this GPU: ${why}`);
    return wanted;
  }
  if (supportsSubgroupMatrix(a)) return 'subgroup-matrix';
  return a.features.has('shader-f16') && !a.cpuDriver ? 'f16' : 'f32';
}

/** The device features a path needs on top of the always-wanted ones (subgroups, timestamps). */
export function featuresFor(path: KernelPath): string[] {
  if (path === 'subgroup-matrix') return ['shader-f16', SUBGROUP_MATRIX_FEATURE];
  if (path === 'f16') return ['shader-f16'];
  return [];
}
