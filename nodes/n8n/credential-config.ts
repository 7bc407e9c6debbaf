// The RWKV Model credential → EngineConfig. n8n number fields always hold a number, so 0 stands
// for "engine default" there, except the request deadline, whose 0 means "none" (its default is 600 s).

import * as os from 'os';
import * as path from 'path';
import type { IExecuteFunctions, ISupplyDataFunctions } from 'n8n-workflow';
import { parseModelConfig, type ModelConfig } from '../shared/model-config';

export const CREDENTIAL_NAME = 'rwkvModelApi';

const zeroIsDefault = (v: unknown) => (v === 0 ? undefined : v);

export function modelConfigFromCredential(data: Record<string, unknown>): ModelConfig {
  return parseModelConfig({
    modelPath: data.modelPath,
    precision: data.precision,
    quantLayers: zeroIsDefault(data.quantLayers),
    device: data.device,
    maxBatch: zeroIsDefault(data.maxBatch),
    chunkSize: zeroIsDefault(data.chunkSize),
    prefillChunkSize: zeroIsDefault(data.prefillChunkSize),
    decodeKeep: zeroIsDefault(data.decodeKeep),
    drawSteps: zeroIsDefault(data.drawSteps),
    cacheMiB: zeroIsDefault(data.cacheMiB),
    stateDir: data.stateDir,
    maxQueue: zeroIsDefault(data.maxQueue),
    maxTokensLimit: zeroIsDefault(data.maxTokensLimit),
    requestTimeoutSeconds: data.requestTimeoutSeconds,
    maxStates: zeroIsDefault(data.maxStates),
    maxContext: zeroIsDefault(data.maxContext),
    engineMode: data.engineMode,
    serverUrl: data.serverUrl,
    apiKey: data.apiKey,
  }, n8nUserFolder());
}

/** n8n keeps its data in $N8N_USER_FOLDER/.n8n (default ~/.n8n): relative paths in the credential mean there. */
export function n8nUserFolder(): string {
  return path.join(process.env.N8N_USER_FOLDER || os.homedir(), '.n8n');
}

export async function modelConfigFor(ctx: IExecuteFunctions | ISupplyDataFunctions): Promise<ModelConfig> {
  return modelConfigFromCredential(await ctx.getCredentials(CREDENTIAL_NAME));
}
