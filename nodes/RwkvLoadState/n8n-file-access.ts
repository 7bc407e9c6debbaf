// n8n's own file access policy (N8N_RESTRICT_FILE_ACCESS_TO, N8N_BLOCK_FILE_ACCESS_TO_N8N_FILES) for a
// state file, judged through the helpers n8n's file nodes use: on the real path the file has inside the
// state folder (symlinks followed), so a state folder configured in a credential cannot reach files the
// instance keeps from workflows. A blocked file gets the same answer as a missing one.

import type { IExecuteFunctions, ResolvedFilePath } from 'n8n-workflow';
import { StateFolder } from '../../engine/state-folder';

/** The two policy helpers; older n8n versions lack resolvePath, and versions before the policy lack both. */
export type FileAccessHelpers = Partial<Pick<IExecuteFunctions['helpers'], 'resolvePath' | 'isFilePathBlocked'>>;

export async function checkFileAccess(helpers: FileAccessHelpers, folder: StateFolder, file: string): Promise<void> {
  if (typeof helpers.isFilePathBlocked !== 'function') return; // this n8n has no file access policy
  const real = await folder.locate(file);
  // resolvePath brands the path as n8n expects; ours is already real, so it is the fallback when n8n's
  // own resolution fails (a file not saved yet).
  let resolved = real as ResolvedFilePath;
  if (typeof helpers.resolvePath === 'function') {
    resolved = await helpers.resolvePath(real).catch(() => resolved);
  }
  if (helpers.isFilePathBlocked(resolved)) throw StateFolder.refusal(file);
}
