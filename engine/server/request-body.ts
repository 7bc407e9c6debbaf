// Request bodies read under a byte bound: a declared Content-Length over the bound is refused before a byte
// is read, and a body that grows past it (chunked, or lying about its length) is cut off as soon as it does,
// so a caller can never make the server buffer more than the bound.

import type { IncomingMessage } from 'http';
import { HttpError } from './http-error';

export async function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined) {
    const n = Number(declared);
    if (!Number.isSafeInteger(n) || n < 0) throw new HttpError(400, 'invalid Content-Length');
    if (n > maxBytes) throw new HttpError(413, `request body is ${n} bytes; this server accepts at most ${maxBytes}`);
  }
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) {
      // Stop reading; the connection is closed after the answer so the rest is never buffered.
      req.pause();
      throw new HttpError(413, `request body is over ${maxBytes} bytes, the most this server accepts`, { close: true });
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts, total);
}

/** The body as a JSON object (the only shape every route takes). */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const type = String(req.headers['content-type'] ?? '');
  if (type && !/^application\/json\b/i.test(type)) throw new HttpError(415, `expected a JSON body (Content-Type: application/json), got ${JSON.stringify(type)}`);
  const raw = await readBody(req, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new HttpError(400, 'request body must be a JSON object');
  return value as Record<string, unknown>;
}
