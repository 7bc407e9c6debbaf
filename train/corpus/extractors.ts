// Plain text out of the formats Debian ships documentation in. Each extractor keeps the prose and
// drops markup; code examples stay (the model should know what a manual looks like), tables of
// symbols and navigation chrome go.
import { execFileSync } from 'child_process';
import * as zlib from 'zlib';
import { Parser } from 'htmlparser2';
import type { ExtractorKind } from './sources';

/** Bytes of a file, gunzipped when it is gzip (also dictzip .dz, which is gzip with extra fields). */
export function maybeGunzip(bytes: Buffer): Buffer {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b ? zlib.gunzipSync(bytes) : bytes;
}

/** Texts (one or more documents) from one file of the given kind. */
export function extractText(kind: ExtractorKind, bytes: Buffer, filePath: string): string[] {
  switch (kind) {
    case 'text':
      return [maybeGunzip(bytes).toString('utf8')];
    case 'rst':
      return [rstToText(maybeGunzip(bytes).toString('utf8'))];
    case 'pod':
      return [podToText(maybeGunzip(bytes).toString('utf8'))];
    case 'html':
      return [htmlToText(maybeGunzip(bytes).toString('utf8'))];
    case 'info':
      return [infoToText(maybeGunzip(bytes).toString('utf8'))];
    case 'dict':
      return dictToEntries(maybeGunzip(bytes).toString('utf8'));
    case 'fortune':
      return fortunesToTexts(bytes.toString('utf8'));
    case 'man':
      return [manToText(filePath)];
  }
}

/** reStructuredText: drop directive option lines, section underlines and role markup. */
export function rstToText(src: string): string {
  const out: string[] = [];
  for (const line of src.split('\n')) {
    // Section adornments: a line of one repeated punctuation character.
    if (/^([=\-~^"'`#*+.:_])\1{2,}\s*$/.test(line)) continue;
    // Comments, link targets, substitution definitions and directive options.
    if (/^\s*\.\.\s+(_|\||\[|\w[\w-]*:\s*$)/.test(line) || /^\s*\.\.\s*$/.test(line)) continue;
    if (/^\s+:[\w-]+:/.test(line) && !/\S\s+\S/.test(line.trim().replace(/^:[\w-]+:\s*/, ''))) continue;
    let text = line.replace(/^(\s*)\.\.\s+[\w-]+::\s*/, '$1');
    // :role:`text <target>` → text, :role:`text` → text, ``code`` → code, `text <url>`_ → text.
    text = text.replace(/:[\w:.-]+:`~?([^`<]*?)\s*(<[^`>]*>)?`/g, '$1');
    text = text.replace(/``([^`]+)``/g, '$1');
    text = text.replace(/`([^`<]+?)\s*<[^`>]+>`__?/g, '$1');
    text = text.replace(/`([^`]+)`_{0,2}/g, '$1');
    text = text.replace(/\*\*([^*]+)\*\*/g, '$1');
    out.push(text);
  }
  return out.join('\n');
}

/** Perl POD: headings become lines, formatting codes lose their markup, commands vanish. */
export function podToText(src: string): string {
  const out: string[] = [];
  let skipping = false;
  for (const line of src.split('\n')) {
    const cmd = /^=(\w+)\s*(.*)$/.exec(line);
    if (cmd) {
      const [, name, rest] = cmd;
      if (name === 'begin' || name === 'for') skipping = name === 'begin';
      else if (name === 'end') skipping = false;
      else if (/^(head\d|item)$/.test(name) && rest.trim() !== '' && rest.trim() !== '*') out.push(stripPodCodes(rest));
      continue;
    }
    if (!skipping) out.push(stripPodCodes(line));
  }
  return out.join('\n');
}

function stripPodCodes(text: string): string {
  let prev: string;
  do {
    prev = text;
    text = text.replace(/[A-Z]<<+\s+(.*?)\s+>>+/g, '$1');
    text = text.replace(/L<([^<>|]*\|)?([^<>]*)>/g, (_m, label: string | undefined, target: string) =>
      label ? label.slice(0, -1) : target.replace(/\/"?([^"]*)"?$/, ' $1').trim(),
    );
    text = text.replace(/E<([^<>]*)>/g, (_m, e: string) => POD_ESCAPES[e] ?? (/^\d+$/.test(e) ? String.fromCodePoint(+e) : ''));
    text = text.replace(/[BCIFSXZ]<([^<>]*)>/g, (_m, inner: string, offset: number, whole: string) =>
      whole[offset] === 'X' || whole[offset] === 'Z' ? '' : inner,
    );
  } while (text !== prev);
  return text;
}

const POD_ESCAPES: Record<string, string> = { lt: '<', gt: '>', verbar: '|', sol: '/', quot: '"', amp: '&' };

const HTML_BLOCKS = new Set([
  'p', 'div', 'br', 'li', 'ul', 'ol', 'dl', 'dt', 'dd', 'tr', 'table', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'pre', 'blockquote', 'section', 'article', 'hr', 'title', 'figure', 'figcaption',
]);
const HTML_SKIP = new Set(['script', 'style', 'head', 'nav', 'noscript', 'svg']);

/** HTML: text content, block elements as paragraph breaks, <pre> kept verbatim, chrome dropped. */
export function htmlToText(html: string): string {
  const parts: string[] = [];
  let skipDepth = 0;
  let preDepth = 0;
  // DocBook/Sphinx navigation blocks: headers, footers and "Prev/Next" tables.
  const chromeStack: boolean[] = [];
  let chromeDepth = 0;
  const parser = new Parser(
    {
      onopentag(name, attrs) {
        const cls = `${attrs.class ?? ''} ${attrs.id ?? ''}`;
        const chrome = /\b(navheader|navfooter|footer|sphinxsidebar|related|toc|breadcrumbs|skip-link|menu-bar|theme-popup|column2|gtoc|synthetic-implementations-list|blanket-implementations-list)\b/.test(cls);
        chromeStack.push(chrome);
        if (chrome) chromeDepth++;
        if (HTML_SKIP.has(name)) skipDepth++;
        if (name === 'pre') preDepth++;
        if (skipDepth > 0 || chromeDepth > 0) return; // no list markers for skipped navigation
        if (HTML_BLOCKS.has(name)) parts.push('\n\n');
        if (name === 'li') parts.push('- ');
      },
      ontext(text) {
        if (skipDepth > 0 || chromeDepth > 0) return;
        parts.push(preDepth > 0 ? text : text.replace(/\s+/g, ' '));
      },
      onclosetag(name) {
        if (chromeStack.pop()) chromeDepth--;
        if (HTML_SKIP.has(name)) skipDepth--;
        if (name === 'pre') preDepth--;
        if (HTML_BLOCKS.has(name)) parts.push('\n\n');
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.write(html);
  parser.end();
  return parts
    .join('')
    .split('\n')
    .map((l) => l.replace(/[ \t]+$/, ''))
    .join('\n')
    .replace(/\n[ \t]+(?=\S)/g, (m) => (m.length > 2 ? m : '\n'))
    .replace(/\n{3,}/g, '\n\n');
}

/** GNU Info: drop node headers, menus, the tag table and the directory entry. */
export function infoToText(src: string): string {
  const out: string[] = [];
  let inMenu = false;
  for (const node of src.split('\x1f')) {
    const lines = node.split('\n');
    if (/^\s*Tag Table:|^\s*End Tag Table|^\s*Indirect:/.test(lines[0] + (lines[1] ?? ''))) continue;
    for (const line of lines) {
      if (/^File: [^,]+,\s+Node:/.test(line)) continue;
      if (/^(INFO-DIR-SECTION|START-INFO-DIR-ENTRY|END-INFO-DIR-ENTRY)/.test(line)) continue;
      if (line.startsWith('* Menu:')) {
        inMenu = true;
        continue;
      }
      if (inMenu) {
        if (line.trim() === '' || line.startsWith('* ') || /^\t/.test(line)) continue;
        inMenu = false;
      }
      // Heading underlines made of *, = or -.
      if (/^[*=\-.]{3,}\s*$/.test(line)) continue;
      out.push(line.replace(/\*note\s+([^:]+)::/gi, 'see $1').replace(/\*note\s+[^:]+:\s*\(?[^.,]*[.,]/gi, ''));
    }
    out.push('');
  }
  return out.join('\n');
}

/** dictd database: one document per headword entry, minus the 00-database-* header entries. */
export function dictToEntries(src: string): string[] {
  // Entries start with a headword at column 0 after a blank line; bodies are indented.
  const entries: string[] = [];
  let current: string[] = [];
  const flush = () => {
    const text = current.join('\n').trim();
    if (text && !/^00-?database/.test(text)) entries.push(text);
    current = [];
  };
  const lines = src.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const startsEntry = line !== '' && !/^\s/.test(line) && (i === 0 || lines[i - 1].trim() === '');
    if (startsEntry && current.some((l) => /^\s/.test(l))) flush();
    current.push(line);
  }
  flush();
  return entries.map((e) =>
    e
      .replace(/\{([^{}]*)\}/g, '$1') // FOLDOC and Jargon cross-reference braces.
      .replace(/\\([^\\\n]{1,60})\\/g, '$1') // GCIDE pronunciation backslashes.
      .replace(/\[1913 Webster\]|\[PJC\]|\[WordNet 1\.5\]/g, '')
      .replace(/^ {2,}/gm, ''),
  );
}

/** fortune files: quotations separated by lines holding a single '%'. */
export function fortunesToTexts(src: string): string[] {
  return src
    .split(/^%$/m)
    .map((f) => f.replace(/^\n+|\s+$/g, ''))
    .filter((f) => f.length > 0);
}

/** A man page rendered by man-db as plain UTF-8 text, without overstrike formatting. */
export function manToText(filePath: string): string {
  const rendered = execFileSync('man', ['-l', '--nh', '--nj', '-E', 'UTF-8', '-P', 'cat', filePath], {
    env: { ...process.env, MANWIDTH: '80', MAN_KEEP_FORMATTING: '', GROFF_NO_SGR: '1' },
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString('utf8');
  const lines = rendered.replace(/.\x08/g, '').split('\n');
  // The first and last lines are the running header and footer.
  return lines
    .slice(1, -2)
    .map((l) => l.replace(/^ {7}/, ''))
    .join('\n');
}
