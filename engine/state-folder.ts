// The confined state folder: every state or conversation file a request names lives inside it.
// A request's path is hostile until checked, so the rules are:
// - it is relative, '/'-separated plain names: no absolute path, no '.', '..' or empty parts;
// - after following symlinks (realpath; on Linux also the opened descriptor's own path) it is still
//   inside the folder's real path;
// - it is opened with O_NOFOLLOW | O_NONBLOCK and checked on the descriptor (fstat: a regular file no
//   larger than the caller's bound), then read from that same descriptor: no check-then-reopen race,
//   a FIFO neither blocks the open nor holds a libuv thread, a device is never read;
// - a save writes a temporary file created exclusively beside the target, then renames it over the
//   target, and replaces only a regular file the caller recognises (an rwkv-flow conversation file).
// Every refusal that depends on what exists on disk gives one message, the same as "not found", so a
// caller cannot probe the filesystem through it; only lexical problems of the path itself are named.

import { randomBytes } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { StateFileError } from './errors';

/** Where states live when no state folder is configured (created on the first save). */
export function defaultStateDir(): string {
  return path.join(os.homedir(), '.rwkv-flow', 'states');
}

// Long enough for any sensible name; a part stays well under NAME_MAX (255) with the temp suffix added.
const MAX_PATH_CHARS = 1024;
const MAX_PART_BYTES = 200;
const MAX_DEPTH = 16;

// Missing on Windows (0 there): O_NOFOLLOW's job is then left to the realpath checks.
const OPEN_READ = fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0);
// O_EXCL makes the create fail on any existing entry, a symlink included.
const OPEN_CREATE = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | (fs.constants.O_NOFOLLOW ?? 0);

/** What is lexically wrong with a state path a request gives, or null when it is well formed. */
export function statePathProblem(file: unknown): string | null {
  if (typeof file !== 'string') return 'must be a path (a string)';
  if (file.length === 0) return 'is empty';
  if (file.length > MAX_PATH_CHARS) return `is longer than ${MAX_PATH_CHARS} characters`;
  if (file.includes('\0')) return 'contains a NUL character';
  const relative = 'must be a path relative to the state folder (names separated by "/", no ".." or "." parts)';
  if (path.isAbsolute(file) || path.win32.isAbsolute(file) || file.includes('\\')) return relative;
  const parts = file.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..')) return relative;
  if (parts.length > MAX_DEPTH) return `has more than ${MAX_DEPTH} parts`;
  if (parts.some((p) => Buffer.byteLength(p) > MAX_PART_BYTES)) return `has a name longer than ${MAX_PART_BYTES} bytes`;
  return null;
}

export class StateFolder {
  /** The configured folder (absolute); its real path is taken at each use, as it may be created later. */
  readonly dir: string;

  constructor(configured?: string) {
    this.dir = configured && configured.trim() !== '' ? path.resolve(configured) : defaultStateDir();
  }

  /** The one answer for every path that is missing, or exists but may not be used. */
  static refusal(file: string): StateFileError {
    return new StateFileError(`file ${JSON.stringify(file)}`, 'not found in the state folder, or not allowed');
  }

  /**
   * The real path `file` has (or, for a file not there yet, would have): for host policies such as
   * n8n's file access rules, which must judge the path that is really opened.
   */
  async locate(file: string): Promise<string> {
    const parts = checkedParts(file);
    let current = await realpathOrNull(this.dir);
    if (current === null) return path.join(this.dir, ...parts);
    const root = current;
    for (let i = 0; i < parts.length; i++) {
      const next = await realpathOrNull(path.join(current, parts[i]));
      if (next === null) return path.join(current, ...parts.slice(i));
      if (!isInside(root, next)) throw StateFolder.refusal(file);
      current = next;
    }
    return current;
  }

  /** The bytes of a regular file inside the folder, at most maxBytes of them (checked before reading). */
  async read(file: string, maxBytes: number): Promise<Uint8Array> {
    const parts = checkedParts(file);
    const root = await realpathOrNull(this.dir);
    if (root === null) throw StateFolder.refusal(file);
    const parent = await realpathOrNull(path.join(root, ...parts.slice(0, -1)));
    if (parent === null || !isInside(root, parent)) throw StateFolder.refusal(file);
    const bytes = await readConfined(root, path.join(parent, parts[parts.length - 1]), { maxBytes }, file);
    if (bytes === null) throw StateFolder.refusal(file);
    return bytes;
  }

  /**
   * Write `bytes` (one buffer, or parts written one after the other) as `file` atomically. Missing subfolders are created inside the folder. An existing
   * target is replaced only when it is a regular file whose first `replaceable.headBytes` bytes
   * `replaceable.accepts`; anything else there (a symlink, a FIFO, a folder, another file) is left alone.
   */
  async write(file: string, bytes: Uint8Array | readonly Uint8Array[], replaceable: Replaceable): Promise<void> {
    const parts = checkedParts(file);
    await fs.promises.mkdir(this.dir, { recursive: true, mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
      throw new StateFileError('folder', `cannot be created (${e.code ?? e.message}); check the State Folder setting`);
    });
    const root = await realpathOrNull(this.dir);
    if (root === null) throw StateFolder.refusal(file);
    // Each subfolder is created and then resolved, so a symlinked part pointing out is caught before the next.
    let folder = root;
    for (const part of parts.slice(0, -1)) {
      const next = path.join(folder, part);
      await fs.promises.mkdir(next, { mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw StateFolder.refusal(file);
      });
      const real = await realpathOrNull(next);
      if (real === null || !isInside(root, real) || !(await isDirectory(real))) throw StateFolder.refusal(file);
      folder = real;
    }
    const name = parts[parts.length - 1];
    const target = path.join(folder, name);
    await this.checkReplaceable(root, target, file, replaceable);

    const temp = path.join(folder, `.${name}.${randomBytes(6).toString('hex')}.tmp`);
    let handle: fs.promises.FileHandle | undefined;
    try {
      handle = await fs.promises.open(temp, OPEN_CREATE, 0o600);
      // A handle's writeFile writes from its current position: the parts follow each other.
      for (const part of bytes instanceof Uint8Array ? [bytes] : bytes) await handle.writeFile(part);
      await handle.sync();
      await handle.close();
      handle = undefined;
      await fs.promises.rename(temp, target);
    } catch (e) {
      await handle?.close().catch(() => undefined);
      await fs.promises.unlink(temp).catch(() => undefined);
      throw new StateFileError(`file ${JSON.stringify(file)}`, `cannot be saved (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }

  private async checkReplaceable(root: string, target: string, file: string, replaceable: Replaceable): Promise<void> {
    const head = await readConfined(root, target, { head: replaceable.headBytes }, file);
    if (head === null) {
      if (await entryExists(target)) throw StateFolder.refusal(file); // a symlink, FIFO, folder...
      return;
    }
    if (!replaceable.accepts(head)) {
      throw new StateFileError(`file ${JSON.stringify(file)}`, 'exists and is not an rwkv-flow conversation file; it is left unchanged');
    }
  }
}

/** Which existing file a save may replace, judged from its first bytes. */
export interface Replaceable {
  headBytes: number;
  accepts(head: Uint8Array): boolean;
}

/** Throws a StateFileError naming what is lexically wrong with a state path (nothing on disk is looked at). */
export function checkStatePath(file: unknown): asserts file is string {
  const problem = statePathProblem(file);
  if (problem) throw new StateFileError(`file ${JSON.stringify(typeof file === 'string' ? file : String(file))}`, problem);
}

function checkedParts(file: string): string[] {
  checkStatePath(file);
  return file.split('/');
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

async function realpathOrNull(p: string): Promise<string | null> {
  try {
    return await fs.promises.realpath(p);
  } catch {
    return null;
  }
}

async function isDirectory(p: string): Promise<boolean> {
  try {
    return (await fs.promises.stat(p)).isDirectory();
  } catch {
    return false;
  }
}

async function entryExists(p: string): Promise<boolean> {
  try {
    await fs.promises.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * Open `target` without following a final symlink or blocking, and read it through the descriptor:
 * null when it is missing or is not a regular file inside root. With maxBytes, the whole file, and a
 * StateFileError when it is larger (said before reading anything); with head, its first bytes only.
 */
async function readConfined(
  root: string,
  target: string,
  limit: { maxBytes: number } | { head: number },
  file: string,
): Promise<Uint8Array | null> {
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(target, OPEN_READ);
  } catch {
    return null;
  }
  try {
    // The path the descriptor really has: a folder swapped for a symlink after the realpath check shows here.
    if (process.platform === 'linux') {
      const opened = await fs.promises.readlink(`/proc/self/fd/${handle.fd}`).catch(() => null);
      if (opened !== null && !isInside(root, opened)) return null;
    }
    const stat = await handle.stat();
    if (!stat.isFile()) return null;
    if ('maxBytes' in limit && stat.size > limit.maxBytes) {
      throw new StateFileError(`file ${JSON.stringify(file)}`, `is ${stat.size} bytes, more than a state of this model can be (${limit.maxBytes})`);
    }
    const bytes = new Uint8Array('head' in limit ? Math.min(limit.head, stat.size) : stat.size);
    let offset = 0;
    while (offset < bytes.length) {
      const { bytesRead } = await handle.read(bytes, offset, bytes.length - offset, offset);
      if (bytesRead === 0) throw new StateFileError(`file ${JSON.stringify(file)}`, 'was truncated while being read');
      offset += bytesRead;
    }
    return bytes;
  } finally {
    await handle.close();
  }
}
