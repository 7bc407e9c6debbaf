// Text hygiene shared by every source: whitespace, control characters, symbol-heavy lines, and
// cutting long texts into pieces small enough to spread over the train and held-out splits.

/** Normalise line ends and whitespace, drop control characters and lines that are mostly symbols. */
export function cleanText(text: string): string {
  const lines = text
    .replace(/\r\n?/g, '\n')
    .replace(/[\x00-\x08\x0b-\x1f\x7f\u00ad\ufeff]/g, '')
    .replace(/\u00a0/g, ' ')
    .split('\n');
  const kept: string[] = [];
  for (const raw of lines) {
    const line = raw.replace(/\s+$/, '');
    if (line.length > 20 && letterShare(line) < 0.45) continue;
    kept.push(line);
  }
  return kept
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function letterShare(line: string): number {
  let letters = 0;
  let counted = 0;
  for (const ch of line) {
    if (ch === ' ') continue;
    counted++;
    if (/\p{L}/u.test(ch)) letters++;
  }
  return counted === 0 ? 1 : letters / counted;
}

/** Share of characters outside ASCII: high for translations and character tables. */
export function nonAsciiShare(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) n++;
  return text.length === 0 ? 0 : n / text.length;
}

/** Cut a text at paragraph breaks into pieces of at most about `maxChars` characters. */
export function splitIntoPieces(text: string, maxChars: number): string[] {
  if (text.length <= maxChars) return [text];
  const pieces: string[] = [];
  let current = '';
  for (const para of text.split('\n\n')) {
    if (current.length > 0 && current.length + para.length + 2 > maxChars) {
      pieces.push(current);
      current = '';
    }
    current = current.length > 0 ? `${current}\n\n${para}` : para;
  }
  if (current.length > 0) pieces.push(current);
  return pieces;
}

/** Join many short texts (dictionary entries, quotations) into documents of about `targetChars`. */
export function groupShortTexts(texts: string[], targetChars: number): string[] {
  const groups: string[] = [];
  let current: string[] = [];
  let size = 0;
  for (const t of texts) {
    current.push(t);
    size += t.length + 2;
    if (size >= targetChars) {
      groups.push(current.join('\n\n'));
      current = [];
      size = 0;
    }
  }
  if (current.length > 0) groups.push(current.join('\n\n'));
  return groups;
}

/** 32-bit FNV-1a of a string: stable split assignment and ordering across runs and machines. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}
