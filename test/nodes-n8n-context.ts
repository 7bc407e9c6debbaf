// A stand-in for n8n's IExecuteFunctions with just what the RWKV nodes call, so their execute()
// can run in mocha. Parameters are given per node (or per item through a function).

import { NodeOperationError, type IExecuteFunctions, type INode, type INodeExecutionData } from 'n8n-workflow';

export type ParamValue = unknown | ((itemIndex: number) => unknown);

export interface ContextOptions {
  items?: INodeExecutionData[];
  params: Record<string, ParamValue>;
  credentials?: Record<string, unknown>;
  continueOnFail?: boolean;
  cancelSignal?: AbortSignal;
  streaming?: boolean;
  binary?: Record<string, Buffer>;
}

export interface FakeContext {
  ctx: IExecuteFunctions;
  chunks: { type: string; itemIndex: number; content?: unknown }[];
}

export const NODE: INode = {
  id: 'node-1',
  name: 'RWKV',
  type: 'rwkv-flow.rwkvGenerate',
  typeVersion: 1,
  position: [0, 0],
  parameters: {},
};

export function executeContext(opts: ContextOptions): FakeContext {
  const items = opts.items ?? [{ json: {} }];
  const chunks: FakeContext['chunks'] = [];
  const ctx = {
    getInputData: () => items,
    getNode: () => NODE,
    continueOnFail: () => opts.continueOnFail ?? false,
    getExecutionCancelSignal: () => opts.cancelSignal,
    getCredentials: async (name: string) => {
      if (name !== 'rwkvModelApi') throw new Error(`unexpected credential ${name}`);
      return opts.credentials ?? { modelPath: '/models/tiny.st', precision: 'f16', maxBatch: 0, chunkSize: 0, cacheMiB: 0, stateDir: '', maxQueue: 0 };
    },
    getNodeParameter: (name: string, itemIndex: number, fallback?: unknown) => {
      if (!(name in opts.params)) {
        if (fallback !== undefined) return fallback;
        throw new NodeOperationError(NODE, `Could not get parameter "${name}"`);
      }
      const v = opts.params[name];
      return typeof v === 'function' ? (v as (i: number) => unknown)(itemIndex) : v;
    },
    isStreaming: () => opts.streaming ?? false,
    sendChunk: (type: string, itemIndex: number, content?: unknown) => chunks.push({ type, itemIndex, content }),
    helpers: {
      getBinaryDataBuffer: async (itemIndex: number, property: string) => {
        const b = opts.binary?.[`${itemIndex}:${property}`];
        if (!b) throw new Error(`item ${itemIndex} has no binary property "${property}"`);
        return b;
      },
    },
  };
  return { ctx: ctx as unknown as IExecuteFunctions, chunks };
}
