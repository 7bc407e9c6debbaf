// The RWKV Model credential → EngineConfig. n8n number fields always hold a number, so 0 stands
// for "engine default" there.

import type { IExecuteFunctions, ISupplyDataFunctions } from 'n8n-workflow';
import { parseModelConfig, type ModelConfig } from '../shared/model-config';

export const CREDENTIAL_NAME = 'rwkvModelApi';

const zeroIsDefault = (v: unknown) => (v === 0 ? undefined : v);

export function modelConfigFromCredential(data: Record<string, unknown>): ModelConfig {
  return parseModelConfig({
    modelPath: data.modelPath,
    precision: data.precision,
    maxBatch: zeroIsDefault(data.maxBatch),
    chunkSize: zeroIsDefault(data.chunkSize),
    prefillChunkSize: zeroIsDefault(data.prefillChunkSize),
    decodeKeep: zeroIsDefault(data.decodeKeep),
    cacheMiB: zeroIsDefault(data.cacheMiB),
    stateDir: data.stateDir,
    maxQueue: zeroIsDefault(data.maxQueue),
    engineMode: data.engineMode,
    serverUrl: data.serverUrl,
    apiKey: data.apiKey,
  });
}

export async function modelConfigFor(ctx: IExecuteFunctions | ISupplyDataFunctions): Promise<ModelConfig> {
  return modelConfigFromCredential(await ctx.getCredentials(CREDENTIAL_NAME));
}
