// RWKV as n8n's embeddings model (vector stores, retrievers): LangChain's Embeddings interface
// (embedDocuments / embedQuery) on top of the shared engine, with the Embed node's pooling and
// normalisation. In n8n it is an instance of LangChain's own Embeddings class (resolved from n8n's
// node_modules at run time), so n8n logs its calls as it does for its own embeddings nodes.

import type { EngineConfig } from '../../engine/api';
import { prepareEmbed, runEmbed, type EmbedInput } from '../shared/embed-request';
import { withEngine } from './engine-keeper';

/** The embedding settings of the node (everything but the text). */
export type EmbeddingOptions = Omit<EmbedInput, 'text'>;

/** Texts of one embedDocuments call are submitted this many at a time, so a large insert does not fill the engine's queue. */
const DOCUMENTS_AT_ONCE = 32;

export class RwkvEmbeddings {
  constructor(
    private readonly engineConfig: EngineConfig,
    private readonly options: EmbeddingOptions = {},
  ) {}

  async embedDocuments(documents: string[]): Promise<number[][]> {
    if (!Array.isArray(documents)) throw new TypeError('embedDocuments takes an array of texts');
    // Every text is checked before any is queued.
    const prepared = documents.map((text) => prepareEmbed({ ...this.options, text }));
    if (prepared.length === 0) return [];
    return withEngine(this.engineConfig, async (engine) => {
      const vectors: number[][] = [];
      for (let i = 0; i < prepared.length; i += DOCUMENTS_AT_ONCE) {
        const batch = prepared.slice(i, i + DOCUMENTS_AT_ONCE);
        for (const r of await Promise.all(batch.map((p) => runEmbed(engine, p)))) vectors.push(r.embedding);
      }
      return vectors;
    });
  }

  async embedQuery(text: string): Promise<number[]> {
    const prepared = prepareEmbed({ ...this.options, text });
    return withEngine(this.engineConfig, async (engine) => (await runEmbed(engine, prepared)).embedding);
  }
}

/** The embeddings as an instance of LangChain's Embeddings class when n8n provides it, else as they are. */
export function asLangChainEmbeddings(embeddings: RwkvEmbeddings): RwkvEmbeddings {
  let Base: (new (params: object) => object) | undefined;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    Base = (require('@langchain/core/embeddings') as { Embeddings?: new (params: object) => object }).Embeddings;
  } catch {
    return embeddings;
  }
  if (typeof Base !== 'function') return embeddings;
  class LangChainRwkvEmbeddings extends Base {
    embedDocuments(documents: string[]): Promise<number[][]> {
      return embeddings.embedDocuments(documents);
    }
    embedQuery(text: string): Promise<number[]> {
      return embeddings.embedQuery(text);
    }
  }
  return new LangChainRwkvEmbeddings({}) as unknown as RwkvEmbeddings;
}
