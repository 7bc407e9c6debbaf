export { TokenSampler } from './token-sampler';
export { resolveSamplerOptions, AI00_DEFAULTS, type ResolvedSamplerOptions } from './sampler-options';
export { SeededRandom } from './seeded-random';
