// Build the tokenized training corpus of the default model from Debian packages.
//
//   node dist/train/corpus/build-corpus.js [--work .carry/debian] [--out .carry/corpus] [--rows 10240]
//   node dist/train/corpus/build-corpus.js --dry-run                 # sizes per package, nothing written
//   node dist/train/corpus/build-corpus.js --doc-only [--out DIR]    # rewrite train/CORPUS.md from DIR/meta.json
//   node dist/train/corpus/build-corpus.js --sources OLD.js --heldout-only --out DIR
//       # only the held-out pieces of another source list (e.g. an earlier corpus, to score a model on)
//
// Steps: apt-get download + dpkg -x each package of sources.ts, extract and clean the English text,
// cut it into pieces, put ~2% of the pieces (by a hash of their origin) in the held-out split,
// count World tokens over the train split, keep the most frequent ones as the reduced vocabulary,
// re-encode everything with the restricted World tokenizer and write u16 row indices.
// Outputs: train.u16, valid.u16 (each piece followed by row 0 = end of text), vocab_map.i32
// (row → World id, little-endian), valid.pieces.json (the held-out texts, to encode for other
// vocabularies with encode-heldout.ts), meta.json; and train/CORPUS.md describing the corpus.
// Every source's licence must be an allowed one (licences.ts); the builder refuses others.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { WorldTokenizer } from '../../engine/tokenizer';
import { cleanText, fnv1a, groupShortTexts, nonAsciiShare, splitIntoPieces } from './clean';
import { extractText } from './extractors';
import { isPermissive } from './licences';
import { rowOfWorldId, selectReducedVocab } from './reduced-vocab';
import { CORPUS_SOURCES, type CorpusSource } from './sources';

interface Options {
  work: string;
  out: string;
  rows: number;
  validPerMille: number;
  pieceChars: number;
  download: boolean;
  corpusDoc: string;
  /** Compiled module exporting CORPUS_SOURCES, instead of ./sources. */
  sources?: string;
  /** Extract and report sizes only. */
  dryRun: boolean;
  /** Write only the held-out texts (valid.pieces.json): for scoring, never for training. */
  heldoutOnly: boolean;
  /** Only rewrite the corpus document from an earlier run's meta.json. */
  docOnly: boolean;
}

interface Piece {
  pkg: string;
  text: string;
  valid: boolean;
}

interface PackageStats {
  pkg: string;
  version: string;
  licence: string;
  licenceNote: string;
  what: string;
  files: number;
  bytes: number;
  pieces: number;
  tokens: number;
}

function parseArgs(argv: string[]): Options {
  const root = path.resolve(__dirname, '..', '..', '..');
  const opts: Options = {
    work: path.join(root, '.carry', 'debian'),
    out: path.join(root, '.carry', 'corpus'),
    rows: 10240,
    validPerMille: 20,
    pieceChars: 16000,
    download: true,
    corpusDoc: path.join(root, 'train', 'CORPUS.md'),
    dryRun: false,
    heldoutOnly: false,
    docOnly: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--work') opts.work = path.resolve(value());
    else if (arg === '--out') opts.out = path.resolve(value());
    else if (arg === '--rows') opts.rows = positiveInt(arg, value());
    else if (arg === '--valid-per-mille') opts.validPerMille = positiveInt(arg, value());
    else if (arg === '--no-download') opts.download = false;
    else if (arg === '--corpus-doc') opts.corpusDoc = path.resolve(value());
    else if (arg === '--sources') opts.sources = path.resolve(value());
    else if (arg === '--dry-run') opts.dryRun = true;
    else if (arg === '--heldout-only') opts.heldoutOnly = true;
    else if (arg === '--doc-only') opts.docOnly = true;
    else throw new Error(`unknown argument ${arg}`);
  }
  if (opts.rows > 65536) throw new RangeError(`--rows ${opts.rows}: row indices are stored as u16, at most 65536`);
  return opts;
}

function positiveInt(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${v}`);
  return n;
}

/** Download (if missing) and unpack one package; returns its root folder and version. */
function fetchPackage(src: CorpusSource, opts: Options): { root: string; version: string } {
  const debDir = path.join(opts.work, 'debs');
  fs.mkdirSync(debDir, { recursive: true });
  const findDeb = () => fs.readdirSync(debDir).find((f) => f.startsWith(`${src.pkg}_`) && f.endsWith('.deb'));
  let deb = findDeb();
  if (!deb) {
    if (!opts.download) throw new Error(`${src.pkg}: no .deb in ${debDir} and --no-download given`);
    execFileSync('apt-get', ['download', src.pkg], { cwd: debDir, stdio: ['ignore', 'ignore', 'inherit'] });
    deb = findDeb();
    if (!deb) throw new Error(`${src.pkg}: apt-get download produced no .deb in ${debDir}`);
  }
  const debPath = path.join(debDir, deb);
  const version = execFileSync('dpkg-deb', ['-f', debPath, 'Version']).toString().trim();
  const root = path.join(opts.work, 'root', src.pkg);
  if (!fs.existsSync(root)) {
    fs.mkdirSync(root, { recursive: true });
    execFileSync('dpkg', ['-x', debPath, root]);
  }
  return { root, version };
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(full));
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

/** All cleaned pieces of one package, in a stable pseudo-random file order (so caps sample widely). */
function piecesOfPackage(src: CorpusSource, root: string, opts: Options, stats: PackageStats): Piece[] {
  const files = listFiles(root)
    .map((f) => path.relative(root, f))
    .filter((rel) => src.include.test(`/${rel}`) && !(src.exclude?.test(`/${rel}`) ?? false))
    .sort((a, b) => fnv1a(a) - fnv1a(b) || (a < b ? -1 : 1));
  if (files.length === 0) throw new Error(`${src.pkg}: no file matches ${src.include}`);
  const pieces: Piece[] = [];
  for (const rel of files) {
    if (src.capBytes !== undefined && stats.bytes >= src.capBytes) break;
    let texts = extractText(src.kind, fs.readFileSync(path.join(root, rel)), path.join(root, rel));
    if (src.kind === 'dict' || src.kind === 'fortune') texts = groupShortTexts(texts, 4000);
    stats.files++;
    texts.forEach((raw, t) => {
      const text = cleanText(raw);
      if (text.length < 200 || nonAsciiShare(text) > 0.03) return;
      splitIntoPieces(text, opts.pieceChars).forEach((piece, p) => {
        if (src.capBytes !== undefined && stats.bytes >= src.capBytes) return;
        const valid = fnv1a(`${src.pkg}/${rel}#${t}.${p}`) % 1000 < opts.validPerMille;
        pieces.push({ pkg: src.pkg, text: piece, valid });
        stats.bytes += Buffer.byteLength(piece);
        stats.pieces++;
      });
    });
  }
  return pieces;
}

function writeU16(file: string, rows: number[][]): number {
  let total = 0;
  for (const r of rows) total += r.length + 1;
  const out = new Uint16Array(total);
  let at = 0;
  for (const r of rows) {
    out.set(r, at);
    at += r.length + 1; // the slot after each piece stays 0: end of text
  }
  fs.writeFileSync(file, new Uint8Array(out.buffer));
  return total;
}

function loadSources(opts: Options): CorpusSource[] {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const sources = opts.sources ? (require(opts.sources) as { CORPUS_SOURCES: CorpusSource[] }).CORPUS_SOURCES : CORPUS_SOURCES;
  if (!opts.heldoutOnly) {
    const refused = sources.filter((s) => !isPermissive(s.licence));
    if (refused.length > 0) {
      throw new Error(
        `not allowed as training text (licences.ts): ${refused.map((s) => `${s.pkg} (${s.licence})`).join(', ')}`,
      );
    }
  }
  return sources;
}

function main(): void {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.docOnly) {
    const meta = JSON.parse(fs.readFileSync(path.join(opts.out, 'meta.json'), 'utf8')) as CorpusMeta;
    fs.writeFileSync(opts.corpusDoc, corpusMarkdown(meta, opts));
    console.log(`${opts.corpusDoc} rewritten from ${path.join(opts.out, 'meta.json')}`);
    return;
  }
  const sources = loadSources(opts);
  const world = WorldTokenizer.bundled();
  const seen = new Set<string>();
  const pieces: Piece[] = [];
  const stats: PackageStats[] = [];
  for (const src of sources) {
    const { root, version } = fetchPackage(src, opts);
    const s: PackageStats = {
      pkg: src.pkg, version, licence: src.licence, licenceNote: src.licenceNote ?? '', what: src.what,
      files: 0, bytes: 0, pieces: 0, tokens: 0,
    };
    for (const piece of piecesOfPackage(src, root, opts, s)) {
      if (seen.has(piece.text)) continue; // exact duplicates (shared boilerplate pages)
      seen.add(piece.text);
      pieces.push(piece);
    }
    stats.push(s);
    console.log(`${src.pkg} ${version}: ${s.files} files, ${(s.bytes / 1e6).toFixed(1)} MB, ${s.pieces} pieces`);
  }
  const total = (valid: boolean) => pieces.filter((p) => p.valid === valid).reduce((n, p) => n + Buffer.byteLength(p.text), 0);
  console.log(`train ${(total(false) / 1e6).toFixed(2)} MB, held out ${(total(true) / 1e6).toFixed(2)} MB of text`);
  if (opts.dryRun) return;
  fs.mkdirSync(opts.out, { recursive: true });
  const heldout = pieces.filter((p) => p.valid).map((p) => p.text);
  fs.writeFileSync(path.join(opts.out, 'valid.pieces.json'), JSON.stringify(heldout));
  if (opts.heldoutOnly) {
    console.log(`${heldout.length} held-out pieces → ${path.join(opts.out, 'valid.pieces.json')}`);
    return;
  }

  // Frequencies of full-vocabulary World tokens over the training split choose the reduced rows.
  const counts = new Float64Array(world.vocabSize);
  for (const p of pieces) if (!p.valid) for (const id of world.encode(p.text)) counts[id]++;
  const vocabMap = selectReducedVocab(world, counts, opts.rows);
  const restricted = world.restrict(vocabMap.subarray(1));
  const rowOf = rowOfWorldId(vocabMap, world.vocabSize);

  const train: number[][] = [];
  const valid: number[][] = [];
  const byPkg = new Map(stats.map((s) => [s.pkg, s]));
  let trainBytes = 0;
  let validBytes = 0;
  for (const p of pieces) {
    const rows = restricted.encode(p.text).map((id) => rowOf[id]);
    byPkg.get(p.pkg)!.tokens += rows.length;
    if (p.valid) {
      valid.push(rows);
      validBytes += Buffer.byteLength(p.text);
    } else {
      train.push(rows);
      trainBytes += Buffer.byteLength(p.text);
    }
  }
  const trainTokens = writeU16(path.join(opts.out, 'train.u16'), train);
  const validTokens = writeU16(path.join(opts.out, 'valid.u16'), valid);
  fs.writeFileSync(path.join(opts.out, 'vocab_map.i32'), new Uint8Array(vocabMap.buffer));
  const meta = {
    rows: vocabMap.length,
    train: { pieces: train.length, bytes: trainBytes, tokens: trainTokens },
    valid: { pieces: valid.length, bytes: validBytes, tokens: validTokens },
    packages: stats,
  };
  fs.writeFileSync(path.join(opts.out, 'meta.json'), JSON.stringify(meta, null, 1));
  fs.writeFileSync(opts.corpusDoc, corpusMarkdown(meta, opts));
  console.log(
    `train ${trainTokens} tokens (${(trainBytes / 1e6).toFixed(1)} MB), valid ${validTokens} tokens ` +
      `(${(validBytes / 1e6).toFixed(1)} MB), ${vocabMap.length} rows → ${opts.out}`,
  );
}

interface CorpusMeta {
  rows: number;
  train: { pieces: number; bytes: number; tokens: number };
  valid: { pieces: number; bytes: number; tokens: number };
  packages: PackageStats[];
}

function corpusMarkdown(meta: CorpusMeta, opts: Options): string {
  const mb = (b: number) => (b / 1e6).toFixed(2);
  const lines = [
    '# Training corpus of the default model',
    '',
    'Generated by `train/corpus/build-corpus.ts` (do not edit by hand; rerun the builder).',
    'English documentation, manuals and reference books from Debian 12 (bookworm) main, fetched with',
    '`apt-get download` and unpacked with `dpkg -x`. Only texts in the public domain or under a permissive',
    'licence are taken (the allowed list: `corpus/licences.ts`; the builder refuses any other source). Each',
    "licence was read from the package's `/usr/share/doc/<package>/copyright`: the stanza covering the files",
    'taken is quoted under the table. `A OR B`: the copyright file offers a choice (both allowed here);',
    '`A AND B`: parts of the texts differ, each allowed.',
    '',
    `- Pieces of at most ${opts.pieceChars} characters; ${opts.validPerMille / 10}% of them (by an FNV-1a hash of package,`,
    '  file and piece number) form the held-out split.',
    `- Reduced vocabulary: ${meta.rows} rows = World token 0 (end of text), the 256 single-byte tokens and the`,
    '  most frequent other World tokens of the train split; text is encoded with the restricted World',
    '  tokenizer (greedy longest match over the allowed ids).',
    `- Train: ${meta.train.pieces} pieces, ${mb(meta.train.bytes)} MB of text, ${meta.train.tokens} tokens` +
      ` (${(meta.train.bytes / meta.train.tokens).toFixed(2)} bytes/token).`,
    `- Held out: ${meta.valid.pieces} pieces, ${mb(meta.valid.bytes)} MB, ${meta.valid.tokens} tokens.`,
    '',
    '| package | version | licence | contents | files | MB | tokens |',
    '| --- | --- | --- | --- | ---: | ---: | ---: |',
    ...meta.packages.map(
      (s) => `| ${s.pkg} | ${s.version} | ${s.licence} | ${s.what} | ${s.files} | ${mb(s.bytes)} | ${s.tokens} |`,
    ),
    '',
    '## What each copyright file says',
    '',
    ...meta.packages.map((s) => `- **${s.pkg}** (${s.licence}): ${s.licenceNote}`),
    '',
  ];
  return lines.join('\n');
}

main();
