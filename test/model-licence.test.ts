// The bundled default model's licences: its weights under the package's licence, and every text it
// was trained on public domain or permissively licensed. The model's metadata, the corpus source
// list (train/corpus/sources.ts), train/CORPUS.md and the README's Licences section must agree.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { openSafetensors } from '../engine/loader/safetensors';
import { isPermissive, licenceAlternatives, PERMISSIVE_LICENCES } from '../train/corpus/licences';
import { CORPUS_SOURCES } from '../train/corpus/sources';
import { REPO_ROOT } from './paths';

const MODEL = path.join(REPO_ROOT, 'models', 'default.st');

interface CorpusLicence {
  pkg: string;
  version: string;
  licence: string;
}

function modelMetadata(): Record<string, string> {
  const reader = openSafetensors(MODEL);
  try {
    return reader.metadata;
  } finally {
    reader.close();
  }
}

/** The lines of a markdown section, from its heading to the next heading of the same level. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `no "${heading}" section`);
  const level = heading.split(' ')[0];
  const next = markdown.indexOf(`\n${level} `, start + heading.length + 2);
  return markdown.slice(start, next < 0 ? undefined : next);
}

/** Cells of the markdown table rows whose first cell is `first`. */
function tableRow(markdown: string, first: string): string[] | undefined {
  for (const line of markdown.split('\n')) {
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    if (cells[0] === first) return cells;
  }
  return undefined;
}

describe('licences of the bundled default model', () => {
  let meta: Record<string, string>;
  let corpus: CorpusLicence[];

  before(() => {
    meta = modelMetadata();
    corpus = meta.corpus_licences ? (JSON.parse(meta.corpus_licences) as CorpusLicence[]) : [];
  });

  it('the allowed list admits public-domain and permissive licences and refuses copyleft ones', () => {
    for (const ok of ['public-domain', 'MIT', 'MIT OR Apache-2.0', 'GPL-2 OR MIT', 'public-domain AND BSD-3-Clause', 'PSF-2.0']) {
      assert.ok(isPermissive(ok), ok);
    }
    for (const bad of ['GPL-2', 'GPL-2+', 'GFDL-1.3', 'GPL-2.0+ OR CC-BY-SA-3.0', 'MIT AND GPL-2', 'GPL-1+ OR Artistic', 'LGPL-2.1']) {
      assert.ok(!isPermissive(bad), `"${bad}" must be refused`);
    }
    assert.throws(() => licenceAlternatives('(MIT OR GPL-2) AND BSD-3-Clause'), /parentheses/);
    assert.throws(() => licenceAlternatives('MIT OR '), /empty term/);
    for (const malformed of ['', 'MIT OR ', '(MIT)', 'GFDL-1.3 (no invariant sections)']) assert.ok(!isPermissive(malformed), malformed);
    for (const id of PERMISSIVE_LICENCES) assert.doesNotMatch(id, /GPL|GFDL|-SA-|Artistic/, `${id} is not permissive`);
  });

  it('every corpus source has an allowed licence and says where it was read', () => {
    assert.ok(CORPUS_SOURCES.length > 0);
    const refused = CORPUS_SOURCES.filter((s) => !isPermissive(s.licence)).map((s) => `${s.pkg} (${s.licence})`);
    assert.deepEqual(refused, [], 'sources whose licence is not in train/corpus/licences.ts');
    for (const src of CORPUS_SOURCES) {
      assert.ok((src.licenceNote ?? '').trim().length > 0, `${src.pkg}: no licenceNote from its copyright file`);
    }
  });

  it("the weights' licence is the package's licence", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { license: string };
    assert.equal(meta.licence, pkg.license);
  });

  it("the model's corpus licences are the source list's, each allowed", () => {
    assert.ok(meta.corpus_licences, `${MODEL} has no corpus_licences metadata`);
    assert.deepEqual(
      corpus.map((c) => ({ pkg: c.pkg, licence: c.licence })),
      CORPUS_SOURCES.map((s) => ({ pkg: s.pkg, licence: s.licence })),
      'the model was trained on another source list than train/corpus/sources.ts',
    );
    for (const c of corpus) {
      assert.ok(isPermissive(c.licence), `${c.pkg}: the model was trained on text under "${c.licence}"`);
      assert.ok(c.version, `${c.pkg}: no version recorded`);
    }
  });

  it('train/CORPUS.md lists the same packages, versions and licences as the model', () => {
    assert.ok(corpus.length > 0, `${MODEL} has no corpus_licences metadata`);
    const doc = fs.readFileSync(path.join(REPO_ROOT, 'train', 'CORPUS.md'), 'utf8');
    for (const c of corpus) {
      const row = tableRow(doc, c.pkg);
      assert.ok(row, `train/CORPUS.md has no row for ${c.pkg}`);
      assert.deepEqual(row.slice(0, 3), [c.pkg, c.version, c.licence], `train/CORPUS.md row of ${c.pkg}`);
    }
  });

  it("the README's Licences section states the weights' licence and each corpus licence", () => {
    assert.ok(corpus.length > 0, `${MODEL} has no corpus_licences metadata`);
    const licences = section(fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8'), '## Licences');
    assert.match(licences, new RegExp(`models/default\\.st\`: the weights are \\*\\*${meta.licence}\\*\\*`));
    for (const c of corpus) {
      const row = tableRow(licences, c.pkg);
      assert.ok(row, `README Licences section has no row for ${c.pkg}`);
      assert.equal(row[1], c.licence, `README licence of ${c.pkg}`);
    }
  });
});
