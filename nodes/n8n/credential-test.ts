// The RWKV Model credential's Test button: loads the model the credential names (or finds it already loaded)
// and says what runs where, so a wrong path or an unusable GPU shows in the credential dialog instead of at the
// first execution. The loaded engine is kept warm for the workflows that use the credential next.

import * as fs from 'fs';
import type { ICredentialsDecrypted, ICredentialTestFunctions, INodeCredentialTestResult } from 'n8n-workflow';
import { modelConfigFromCredential } from './credential-config';
import { useEngine } from './engine-keeper';

export const CREDENTIAL_TEST = 'rwkvModelApiTest';

export async function testModelCredential(this: ICredentialTestFunctions | void, credential: ICredentialsDecrypted): Promise<INodeCredentialTestResult> {
  let use;
  try {
    const config = modelConfigFromCredential((credential.data ?? {}) as Record<string, unknown>);
    use = await useEngine(config);
    const m = use.engine.modelInfo;
    const file = config.modelPath ?? 'the bundled default model';
    const size = config.modelPath ? ` (${(fs.statSync(config.modelPath).size / 2 ** 20).toFixed(0)} MiB)` : '';
    return { status: 'OK', message: `Loaded ${file}${size}: RWKV ${m.version}, ${m.nLayer} layers × ${m.nEmbd}, vocabulary ${m.vocabSize}, on ${m.adapter}` };
  } catch (err) {
    return { status: 'Error', message: err instanceof Error ? err.message : String(err) };
  } finally {
    await use?.done();
  }
}
