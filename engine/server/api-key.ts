// The optional bearer key of `rwkv-flow serve`. Compared in constant time: both sides are hashed to 32 bytes
// first, so neither the key's content nor its length shows in how long a wrong guess takes.

import { createHash, timingSafeEqual } from 'crypto';
import type { IncomingMessage } from 'http';
import { HttpError } from './http-error';

export class ApiKeyCheck {
  private readonly digest: Buffer | null;

  constructor(key: string | undefined) {
    if (key !== undefined && key.length === 0) throw new Error('the API key is empty; give a non-empty key or none');
    this.digest = key === undefined ? null : ApiKeyCheck.hash(key);
  }

  get required(): boolean {
    return this.digest !== null;
  }

  /** Throws 401 unless the request carries `Authorization: Bearer <key>` (or no key is configured). */
  check(req: IncomingMessage): void {
    if (!this.digest) return;
    const header = req.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
    const given = ApiKeyCheck.hash(match ? match[1] : '');
    // Always compared, even with no header, so a missing key costs the same as a wrong one.
    const ok = timingSafeEqual(given, this.digest) && match !== null;
    if (!ok) throw new HttpError(401, 'missing or wrong API key (send Authorization: Bearer <key>)');
  }

  private static hash(s: string): Buffer {
    return createHash('sha256').update(s, 'utf8').digest();
  }
}
