// Incremental detokenization for streaming output. A token can end in the middle of a UTF-8
// character (World tokens split CJK characters and emoji at byte level), so text is only released
// once its characters are complete; an incomplete tail is held until the next token arrives.

import type { WorldTokenizer } from './tokenizer';

export class StreamDecoder {
  // WHATWG streaming decode releases exactly the complete code points and holds a possibly valid
  // incomplete tail; concatenated output equals a one-shot decode of all the bytes.
  // ignoreBOM keeps a leading U+FEFF, as WorldTokenizer.decode does.
  private decoder = new TextDecoder('utf-8', { ignoreBOM: true });

  constructor(private readonly tokenizer: WorldTokenizer) {}

  /** Decode more tokens; returns only complete characters (invalid bytes as U+FFFD). */
  push(ids: ArrayLike<number>): string {
    if (ids.length === 0) return '';
    return this.decoder.decode(this.tokenizer.decodeBytes(ids), { stream: true });
  }

  /** Release whatever is held (an unfinished character becomes U+FFFD) and start afresh. */
  flush(): string {
    return this.decoder.decode();
  }
}
