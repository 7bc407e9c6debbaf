// The World vocabulary for the grammar tests, loaded once.

import { WorldTokenizer } from '../engine/tokenizer';

let cached: WorldTokenizer | undefined;

export function worldTokenizer(): WorldTokenizer {
  return (cached ??= WorldTokenizer.bundled());
}
