// A redeploy in the Node-RED test runtime, waiting for the flows to start as long as a loaded CI machine needs:
// node-red-node-test-helper's setFlows() gives 'flows:started' 300 ms and then rejects with "timeout waiting
// event", which a full redeploy closing ten in-flight messages missed once in a CI run (2026-12-04).

interface RedeployHelper {
  _redNodes: { setFlows(flow: object[], credentials: object, type: string): Promise<unknown> };
  _events: { on(event: string, fn: () => void): void; off(event: string, fn: () => void): void };
}

export async function redeploy(helper: unknown, flow: object[], type: 'full' | 'flows' | 'nodes' = 'full', timeoutMs = 10_000): Promise<void> {
  const h = helper as RedeployHelper;
  let onStarted: () => void = () => {};
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the flows did not start within ${timeoutMs} ms of a redeploy`)), timeoutMs);
    onStarted = () => {
      clearTimeout(timer);
      resolve();
    };
    h._events.on('flows:started', onStarted);
  });
  try {
    await h._redNodes.setFlows(flow, {}, type);
    await started;
  } finally {
    h._events.off('flows:started', onStarted);
  }
}
