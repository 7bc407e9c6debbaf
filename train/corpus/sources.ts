// The Debian packages the default model is trained on: English documentation, manuals and
// reference books from Debian 12 main whose texts are public domain or permissively licensed
// (see licences.ts for the allowed list). Each licence was read from the package's
// /usr/share/doc/<pkg>/copyright (the stanza covering the files taken is quoted in `licenceNote`);
// the builder records the exact versions it downloaded in train/CORPUS.md and the model's metadata.

/** How a package's files are turned into plain text (see extractors.ts). */
export type ExtractorKind = 'text' | 'rst' | 'pod' | 'html' | 'info' | 'dict' | 'fortune' | 'man';

export interface CorpusSource {
  /** Debian binary package name (apt-get download). */
  pkg: string;
  /** Licence of the texts taken, an SPDX-style expression (licences.ts says which are allowed). */
  licence: string;
  /** What the copyright file says about the files taken, in its own terms. */
  licenceNote: string;
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
    licenceNote: 'the copyright file gives the Python License (PSF License Agreement); the documentation\'s own licence page (license.rst) puts it under the PSF License Agreement, its code examples also under Zero-Clause BSD',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    exclude: /\/whatsnew\/changelog/,
    what: 'Python 3.11 documentation (reStructuredText sources)',
  },
  {
    pkg: 'postgresql-doc-15',
    licence: 'PostgreSQL',
    licenceNote: 'Files: * - License: PostgreSQL',
    kind: 'html',
    include: /\/html\/[^/]+\.html$/,
    exclude: /\/release-\d/,
    what: 'PostgreSQL 15 manual',
  },
  {
    pkg: 'rust-doc',
    licence: 'MIT OR Apache-2.0',
    licenceNote: 'Files: src/doc/* (the books) and library/* (the standard library) - License: MIT or Apache-2.0 (dual: either may be chosen)',
    kind: 'html',
    include:
      /\/html\/((book|reference|nomicon|rust-by-example|embedded-book|edition-guide|rustc|rustdoc)\/.*|std\/(.*\/)?(index|struct\.|trait\.|enum\.|primitive\.|macro\.)[^/]*)\.html$/,
    // print.html repeats a whole book on one page; the edition folders of the book are redirect stubs.
    exclude: /\/(print|toc|404|SUMMARY)\.html$|\/book\/(first|second)-edition\/|\/book\/20\d\d-edition\//,
    capBytes: 14 * MB,
    what: 'The Rust books (The Rust Programming Language, the Reference, the Rustonomicon, Rust by Example, the Embedded, Edition, rustc and rustdoc books) and the standard library documentation',
  },
  {
    pkg: 'python-django-doc',
    licence: 'BSD-3-Clause',
    licenceNote: 'Files: * - License: BSD-3-Clause',
    kind: 'html',
    include: /\/html\/.*\.html$/,
    exclude: /\/(genindex|py-modindex|search|contents)\.html$|\/_modules\//,
    capBytes: 10 * MB,
    what: 'Django 3.2 documentation',
  },
  {
    pkg: 'llvm-15-doc',
    licence: 'Apache-2.0 WITH LLVM-exception',
    licenceNote: 'Files: * - License: APACHE-2-LLVM-EXCEPTIONS (Apache License 2.0 with the LLVM exceptions)',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    exclude: /\/(ReleaseNotes|CommandGuide\/llvm-exegesis-)/,
    what: 'LLVM 15 documentation (reStructuredText sources)',
  },
  {
    pkg: 'clang-15-doc',
    licence: 'Apache-2.0 WITH LLVM-exception',
    licenceNote: 'Files: * - License: APACHE-2-LLVM-EXCEPTIONS (Apache License 2.0 with the LLVM exceptions)',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    // The attribute and diagnostic references are generated lists.
    exclude: /\/(ReleaseNotes|DiagnosticsReference|AttributeReference|ClangCommandLineReference)\.rst\.txt$/,
    what: 'Clang 15 documentation (reStructuredText sources)',
  },
  {
    pkg: 'erlang-doc',
    licence: 'Apache-2.0',
    licenceNote: 'Files: * - License: Apache-2.0 (not taken: lib/edoc and lib/syntax_tools, Apache-2.0 or LGPL-2.1; lib/eldap, MIT)',
    kind: 'html',
    include: /\/doc\/erlang-doc\/(doc\/[a-z_]+|erts-[\d.]+\/doc\/html|lib\/[a-z_]+-[\d.]+\/doc\/html)\/[^/]+\.html$/,
    // edoc, syntax_tools and eldap have stanzas of their own; wx is generated from wxWidgets' reference.
    exclude: /\/(index|release_notes|notes|users_guide|part|book|ref_man|frame)\.html$|_app\.html$|\/lib\/(edoc|syntax_tools|eldap|wx)-/,
    capBytes: 12 * MB,
    what: 'Erlang/OTP 25 documentation: system guides, ERTS and the applications',
  },
  {
    pkg: 'sqlite3-doc',
    licence: 'public-domain',
    licenceNote: 'Files: * - License: public-domain',
    kind: 'html',
    include: /\/doc\/sqlite3\/.*\.html$/,
    exclude: /\/(releaselog|changes|chronology|doclist|sitemap|keyword_index|toc|news|index)\b/,
    what: 'SQLite 3.40 documentation',
  },
  {
    pkg: 'nodejs-doc',
    licence: 'MIT',
    licenceNote: 'Files: * - License: Expat (the MIT licence)',
    kind: 'html',
    include: /\/doc\/nodejs\/api\/[^/]+\.html$/,
    exclude: /\/(all|index|deprecations)\.html$/,
    what: 'Node.js 18 API documentation',
  },
  {
    pkg: 'apache2-doc',
    licence: 'Apache-2.0',
    licenceNote: 'Files: * - License: Apache-2.0',
    kind: 'html',
    include: /\/manual\/en\/.*\.html$/,
    exclude: /\/(index|sitemap|glossary|quickreference)\.html$|\/mod\/directives\.html$/,
    what: 'Apache HTTP Server 2.4 manual (English)',
  },
  {
    pkg: 'cmake-doc',
    licence: 'BSD-3-Clause',
    licenceNote: 'Files: * - License: BSD-3-clause (the copyright file is shipped by cmake-data; cmake-doc links to it)',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    exclude: /\/release\//,
    capBytes: 4 * MB,
    what: 'CMake 3.25 documentation (reStructuredText sources)',
  },
  {
    pkg: 'python-sqlalchemy-doc',
    licence: 'MIT',
    licenceNote: 'Files: * - License: Expat (the MIT licence)',
    kind: 'rst',
    include: /\/rst\/.*\.rst$/,
    exclude: /\/changelog\//,
    what: 'SQLAlchemy 1.4 documentation (reStructuredText sources)',
  },
  {
    pkg: 'sphinx-doc',
    licence: 'BSD-2-Clause',
    licenceNote: 'Files: * - License: BSD-2-clause',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    exclude: /\/changes\.rst\.txt$/,
    what: 'Sphinx 5.3 documentation (reStructuredText sources)',
  },
  {
    pkg: 'python-flask-doc',
    licence: 'BSD-3-Clause',
    licenceNote: 'Files: * - License: BSD-3-clause',
    kind: 'rst',
    include: /\/html\/_sources\/.*\.rst\.txt$/,
    exclude: /\/changes\.rst\.txt$/,
    what: 'Flask 2.2 documentation (reStructuredText sources)',
  },
  {
    pkg: 'docutils-doc',
    licence: 'public-domain AND BSD-2-Clause AND BSD-3-Clause',
    licenceNote: 'Files: * - License: public-domain; docs/user/smartquotes.txt: BSD-3-clause and BSD-2-clause; docs/dev/enthought-plan.txt: BSD-3-clause',
    kind: 'rst',
    include: /\/docs\/.*\.txt$/,
    what: 'Docutils 0.19 documentation (reStructuredText sources)',
  },
  {
    pkg: 'libssl-doc',
    licence: 'Apache-2.0',
    licenceNote: 'Files: * - License: Apache-2.0 (OpenSSL 3)',
    kind: 'man',
    include: /\/man\/man[1-8]\/[^/]+\.gz$/,
    // Most man3 pages are links to one page per family (man-db follows .so requests).
    capBytes: 5 * MB,
    what: 'OpenSSL 3.0 manual pages (library functions and overviews)',
  },
  {
    pkg: 'golang-1.19-doc',
    licence: 'BSD-3-Clause',
    licenceNote: 'Files: * - License: Go (the three-clause BSD licence of the Go Authors)',
    kind: 'html',
    include: /\/html\/(go_spec|go_mem|asm)\.html$/,
    what: 'The Go programming language specification, memory model and assembler guide',
  },
  {
    pkg: 'sbcl-doc',
    licence: 'public-domain',
    licenceNote: 'Files: * - License: public-domain',
    kind: 'html',
    include: /\/doc\/sbcl\/.*\.html$/,
    what: 'SBCL (Steel Bank Common Lisp) manual and internals notes',
  },
  {
    pkg: 'dict-jargon',
    licence: 'public-domain',
    licenceNote: 'Files: * - License: public-domain ("This document (the Jargon File) is in the public domain")',
    kind: 'dict',
    include: /\.dict\.dz$/,
    what: 'The Jargon File 4.4.7',
  },
  {
    pkg: 'dict-devil',
    licence: 'public-domain',
    licenceNote: '"The Devil\'s Dictionary is in the public domain, its copyright has expired"',
    kind: 'dict',
    include: /\.dict\.dz$/,
    what: "Ambrose Bierce, The Devil's Dictionary",
  },
  {
    pkg: 'fortunes',
    licence: 'BSD-3-Clause',
    licenceNote: 'the copyright file places the package, data files included, under the BSD copyright of the Regents of the University of California (clause 3 deleted); it names no other licence for the quotations',
    kind: 'fortune',
    // The plain files are the UTF-8 texts (the .u8 names are links to them, .dat are indexes).
    include: /\/fortunes\/[a-z-]+$/,
    exclude: /\/(art|ascii-art|translate-me|zippy)$/,
    what: 'Quotations, proverbs and jokes from fortune-mod',
  },
];
