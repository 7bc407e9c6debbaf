import { randomFillSync } from 'node:crypto';

/**
 * Fills `target` (typically a mapped GPU range) with random bytes, 64 MiB at a time, and shows
 * each chunk to `visit` with its offset. The bytes are made in ordinary memory and then copied
 * in: a mapped range may be write-combined host memory (NVIDIA's Vulkan driver uses it for
 * upload buffers), where every read is uncached, and OpenSSL's generator reads its output
 * buffer while filling it. So: never read back from a range mapped for writing.
 */
export function fillRandom(target: Uint8Array, visit?: (chunk: Uint8Array, offset: number) => void): void {
  const chunk = new Uint8Array(Math.min(target.length, 1 << 26));
  for (let offset = 0; offset < target.length; offset += chunk.length) {
    const part = chunk.subarray(0, Math.min(chunk.length, target.length - offset));
    randomFillSync(part);
    target.set(part, offset);
    visit?.(part, offset);
  }
}
