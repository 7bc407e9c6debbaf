// The Debian packages the default model is trained on: English documentation, manuals and
// reference books from Debian main. Licences were read from each package's
// /usr/share/doc/<pkg>/copyright; the builder records the exact versions it downloaded.

/** How a package's files are turned into plain text (see extractors.ts). */
export type ExtractorKind = 'text' | 'rst' | 'pod' | 'html' | 'info' | 'dict' | 'fortune' | 'man';

export interface CorpusSource {
  /** Debian binary package name (apt-get download). */
  pkg: string;
  /** Licence of the texts taken, as stated in the package's copyright file. */
  licence: string;
  kind: ExtractorKind;
  /** Paths inside the unpacked package to take (tested against the path below the package root). */
  include: RegExp;
  exclude?: RegExp;
  /** Upper bound of extracted bytes from this package, so one large source cannot dominate. */
  capBytes?: number;
  what: string;
}

const MB = 1 << 20;

export const CORPUS_SOURCES: CorpusSource[] = [
  {
    pkg: 'python3.11-doc',
    licence: 'PSF-2.0',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    exclude: /\/whatsnew\/changelog/,
    what: 'Python 3.11 documentation (reStructuredText sources)',
  },
  {
    pkg: 'linux-doc-6.1',
    licence: 'GPL-2',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    // Translations are not English; the ABI listings are mostly sysfs paths.
    exclude: /\/(translations|ABI|netlink\/specs)\//,
    capBytes: 26 * MB,
    what: 'Linux kernel documentation',
  },
  {
    pkg: 'perl-doc',
    licence: 'GPL-1+ or Artistic',
    kind: 'pod',
    include: /\.pod$/,
    exclude: /perl\d+delta\.pod$/,
    what: 'Perl manuals (perlfaq, perlop, perlre, tutorials, ...)',
  },
  {
    pkg: 'postgresql-doc-15',
    licence: 'PostgreSQL',
    kind: 'html',
    include: /\/html\/[^/]+\.html$/,
    exclude: /\/release-\d/,
    what: 'PostgreSQL 15 manual',
  },
  {
    pkg: 'git-doc',
    licence: 'GPL-2',
    kind: 'text',
    include: /\/git-doc\/[^/]+\.txt$/,
    exclude: /\/RelNotes\//,
    what: 'Git manual pages and guides (AsciiDoc sources)',
  },
  {
    pkg: 'debian-handbook',
    licence: 'GPL-2.0+ or CC-BY-SA-3.0',
    kind: 'html',
    include: /\/html\/en-US\/[^/]+\.html$/,
    what: "The Debian Administrator's Handbook",
  },
  {
    pkg: 'debian-reference-en',
    licence: 'GPL-2+',
    kind: 'html',
    include: /\.en\.html$/,
    exclude: /\/index\.en\.html$/,
    what: 'Debian Reference',
  },
  {
    pkg: 'debian-policy',
    licence: 'GPL-2+',
    kind: 'text',
    include: /\/debian-policy\/[^/]+\.txt\.gz$/,
    what: 'Debian Policy Manual and related documents',
  },
  {
    pkg: 'developers-reference',
    licence: 'GPL-2',
    kind: 'rst',
    include: /\/_sources\/.*\.rst\.txt$/,
    what: "Debian Developer's Reference",
  },
  {
    pkg: 'doc-debian',
    licence: 'GPL',
    kind: 'text',
    include: /\/doc\/debian\/.*\.txt(\.gz)?$/,
    what: 'Debian constitution, social contract, bug tracking system guides',
  },
  {
    pkg: 'bash-doc',
    licence: 'GFDL-1.3 (Bash Reference Manual, no invariant sections)',
    kind: 'info',
    include: /\/info\/bash\.info\.gz$/,
    what: 'Bash Reference Manual',
  },
  {
    pkg: 'guile-3.0-doc',
    licence: 'GFDL-1.3 (no invariant sections)',
    kind: 'info',
    include: /\/info\/guile-3\.0\/guile\.info(-\d+)?\.gz$/,
    what: 'Guile reference manual',
  },
  {
    pkg: 'r-doc-info',
    licence: 'GPL-2',
    kind: 'info',
    include: /\/info\/.*\.info(-\d+)?\.gz$/,
    what: 'R manuals (introduction, language definition, data import, administration)',
  },
  {
    pkg: 'gnu-standards',
    licence: 'GFDL-1.3 (no invariant sections)',
    kind: 'info',
    include: /\/info\/.*\.info(-\d+)?\.gz$/,
    what: 'GNU Coding Standards and GNU maintainer information',
  },
  {
    pkg: 'diffutils-doc',
    licence: 'GFDL-1.3 (no invariant sections)',
    kind: 'html',
    include: /\.html$/,
    what: 'GNU diffutils manual',
  },
  {
    pkg: 'manpages',
    licence: 'GPL-2+, BSD-2-clause, BSD-3-clause and verbatim (per page)',
    kind: 'man',
    include: /\/man\/man[1-8]\/[^/]+\.gz$/,
    // Character set tables are no prose.
    exclude: /\/(ascii|armscii-8|charsets|cp1251|cp1252|iso_8859-\d+|koi8-[ru]|utf-8|unicode|latin\d+|uri)\.\d\.gz$/,
    what: 'Linux man-pages (system calls, file formats, overviews)',
  },
  {
    pkg: 'dict-jargon',
    licence: 'public domain (Jargon File 4.4.7)',
    kind: 'dict',
    include: /\.dict\.dz$/,
    what: 'The Jargon File',
  },
  {
    pkg: 'dict-devil',
    licence: 'public domain',
    kind: 'dict',
    include: /\.dict\.dz$/,
    what: "Ambrose Bierce, The Devil's Dictionary",
  },
  {
    pkg: 'dict-foldoc',
    licence: 'GFDL-1.1+',
    kind: 'dict',
    include: /\.dict\.dz$/,
    what: 'Free On-line Dictionary of Computing',
  },
  {
    pkg: 'dict-gcide',
    licence: 'GPL-3+ (GNU Collaborative International Dictionary of English)',
    kind: 'dict',
    include: /\.dict\.dz$/,
    capBytes: 8 * MB,
    what: "GCIDE (Webster's 1913 based English dictionary), first part",
  },
  {
    pkg: 'fortunes',
    licence: 'BSD-3-clause (fortune-mod data)',
    kind: 'fortune',
    // The plain files are the UTF-8 texts (the .u8 names are links to them, .dat are indexes).
    include: /\/fortunes\/[a-z-]+$/,
    exclude: /\/(art|ascii-art|translate-me|zippy)$/,
    what: 'Quotations, proverbs and jokes from fortune-mod',
  },
];
