// The compile worker's entry point (node:worker_threads): compiles one constraint per message
// and sends back its tables (buffers transferred) or the ConstraintError's message and place.
// The main thread bounds its time and heap (worker-compiler.ts).

import { parentPort } from 'node:worker_threads';
import { compileTables, ConstraintSource, tablesTransferList } from './compile-pipeline';
import { ConstraintError } from './constraint-error';

export interface CompileRequest {
  id: number;
  source: ConstraintSource;
}

export type CompileReply =
  | { id: number; ok: true; tables: ReturnType<typeof compileTables> }
  | { id: number; ok: false; message: string; place?: string };

parentPort?.on('message', (req: CompileRequest) => {
  let reply: CompileReply;
  let transfer: ArrayBuffer[] = [];
  try {
    const tables = compileTables(req.source);
    reply = { id: req.id, ok: true, tables };
    transfer = tablesTransferList(tables);
  } catch (e) {
    if (e instanceof ConstraintError) {
      const suffix = e.place ? ` (at ${e.place})` : '';
      const message = suffix && e.message.endsWith(suffix) ? e.message.slice(0, -suffix.length) : e.message;
      reply = { id: req.id, ok: false, message, place: e.place };
    } else if (e instanceof SyntaxError) reply = { id: req.id, ok: false, message: `jsonSchema is not valid JSON: ${e.message}` };
    else reply = { id: req.id, ok: false, message: `compiling the constraint failed: ${(e as Error)?.message ?? String(e)}` };
  }
  parentPort!.postMessage(reply, transfer);
});
