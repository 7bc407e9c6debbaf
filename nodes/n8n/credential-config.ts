// The RWKV Model credential → EngineConfig. n8n number fields always hold a number, so 0 stands
// for "engine default" there.

import type { IExecuteFunctions, ISupplyDataFunctions } from 'n8n-workflow';
import type { EngineConfig } from '../../engine/api';
import { parseModelConfig } from '../shared/model-config';

export const CREDENTIAL_NAME = 'rwkvModelApi';

const zeroIsDefault = (v: unknown) => (v === 0 ? undefined : v);

export function modelConfigFromCredential(data: Record<string, unknown>): EngineConfig {
  return parseModelConfig({
    modelPath: data.modelPath,
    precision: data.precision,
    device: data.device,
    maxBatch: zeroIsDefault(data.maxBatch),
    chunkSize: zeroIsDefault(data.chunkSize),
    prefillChunkSize: zeroIsDefault(data.prefillChunkSize),
    decodeKeep: zeroIsDefault(data.decodeKeep),
    cacheMiB: zeroIsDefault(data.cacheMiB),
    stateDir: data.stateDir,
    maxQueue: zeroIsDefault(data.maxQueue),
  });
}

export async function modelConfigFor(ctx: IExecuteFunctions | ISupplyDataFunctions): Promise<EngineConfig> {
  return modelConfigFromCredential(await ctx.getCredentials(CREDENTIAL_NAME));
}
