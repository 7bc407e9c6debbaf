// A bump allocator laying out everything the CPU backend keeps in its one shared WebAssembly memory: weights,
// slot states, scratch. All regions are placed once at creation, then the memory is made at its final size;
// addresses are bytes, 16-aligned for SIMD loads. The first 64 KiB stay unused, so address 0 can mean "none".

import { MAX_PAGES } from './wasm-kernels';

const PAGE = 65536;

export class Arena {
  private top = PAGE;

  /** Reserves `bytes` and returns its address. */
  alloc(bytes: number): number {
    const at = this.top;
    this.top += Math.ceil(Math.max(0, bytes) / 64) * 64;
    return at;
  }

  allocFloats(n: number): number {
    return this.alloc(n * 4);
  }

  get bytes(): number {
    return this.top;
  }

  /** The shared memory holding every region, zero-filled. */
  createMemory(): WebAssembly.Memory {
    const pages = Math.ceil(this.top / PAGE);
    if (pages > MAX_PAGES) {
      throw new RangeError(`the CPU backend needs ${this.top} bytes of memory; WebAssembly allows at most 4 GiB (try fewer slots or a smaller chunk size)`);
    }
    return new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  }
}
