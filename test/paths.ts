import * as path from 'path';

/** Repository root (tests run from dist/test, two levels below it). */
export const REPO_ROOT = path.resolve(__dirname, '..', '..');
/** Read-only reference data laid beside the checkout; never written by tests. */
export const SHARED = process.env.RWKV_SHARED ?? path.resolve(REPO_ROOT, '..', 'shared');
export const GOLDEN = path.join(SHARED, 'golden');
export const BUNDLED_VOCAB = path.join(REPO_ROOT, 'vocab', 'rwkv_vocab_v20230424.txt');
