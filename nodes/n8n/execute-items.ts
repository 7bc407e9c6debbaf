// The execute() loop every RWKV n8n node shares. All input items are submitted to the engine at
// once so they batch on the GPU; each output item is paired with its input item; with "Continue On
// Fail" a failed item becomes {error} and the others carry on, otherwise the first failure cancels
// the rest (freeing their GPU slots) and fails the node. Cancelling the execution aborts everything.
// Generation runs in-process: no HTTP call, hence no client-side timeout to run into, however long it takes.

import { setMaxListeners } from 'events';
import { NodeOperationError, type IDataObject, type IExecuteFunctions, type INodeExecutionData } from 'n8n-workflow';
import type { Engine } from '../../engine/api';
import { modelConfigFor } from './credential-config';
import { withEngine } from './engine-keeper';

export type ItemWork = (itemIndex: number, engine: Engine, signal: AbortSignal) => Promise<IDataObject>;

export async function executeItems(ctx: IExecuteFunctions, work: ItemWork): Promise<INodeExecutionData[][]> {
  const items = ctx.getInputData();
  const continueOnFail = ctx.continueOnFail();
  const config = await modelConfigFor(ctx).catch((err: Error) => {
    throw new NodeOperationError(ctx.getNode(), `RWKV Model credential: ${err.message}`);
  });

  const controller = new AbortController();
  // Every item's request listens on this one signal (each listener goes when its request ends): a batch of many
  // items is not a leak, so Node must not print its leak warning into n8n's log for it.
  setMaxListeners(items.length + 10, controller.signal);
  const cancel = ctx.getExecutionCancelSignal();
  const onCancel = () => controller.abort();
  if (cancel?.aborted) controller.abort();
  cancel?.addEventListener('abort', onCancel, { once: true });
  let firstFailure: number | undefined;

  try {
    const settled = await withEngine(config, (engine) =>
      Promise.allSettled(
        items.map(async (_, i) => {
          try {
            return await work(i, engine, controller.signal);
          } catch (err) {
            if (!continueOnFail && firstFailure === undefined && !controller.signal.aborted) {
              firstFailure = i;
              controller.abort();
            }
            throw err;
          }
        }),
      ),
    );
    if (cancel?.aborted) throw new NodeOperationError(ctx.getNode(), 'execution cancelled');
    if (firstFailure !== undefined) {
      throw toNodeError(ctx, (settled[firstFailure] as PromiseRejectedResult).reason, firstFailure);
    }
    return [
      settled.map((result, i) =>
        result.status === 'fulfilled'
          ? { json: result.value, pairedItem: { item: i } }
          : { json: { error: messageOf(result.reason) }, pairedItem: { item: i } },
      ),
    ];
  } finally {
    cancel?.removeEventListener('abort', onCancel);
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function toNodeError(ctx: IExecuteFunctions, err: unknown, itemIndex: number): NodeOperationError {
  if (err instanceof NodeOperationError) return err;
  return new NodeOperationError(ctx.getNode(), err instanceof Error ? err : messageOf(err), { itemIndex });
}
