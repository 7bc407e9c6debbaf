// n8n AI sub-node "RWKV Embeddings": the local RWKV model as the embeddings model of n8n's vector
// stores and retrievers (ai_embedding output).

import { NodeOperationError, type INodeType, type INodeTypeDescription, type ISupplyDataFunctions, type SupplyData } from 'n8n-workflow';
import { CREDENTIAL_NAME, modelConfigFor } from '../n8n/credential-config';
import { EMBEDDING_OPTIONS, INITIAL_STATE_OPTION, sortedOptions } from '../n8n/option-properties';
import { asLangChainEmbeddings, RwkvEmbeddings, type EmbeddingOptions } from '../n8n/rwkv-embeddings';
import { prepareEmbed } from '../shared/embed-request';

export class EmbeddingsRwkv implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'RWKV Embeddings',
    name: 'embeddingsRwkv',
    icon: 'file:../../../icons/rwkv-embed.svg',
    group: ['transform'],
    version: 1,
    description: 'A local RWKV model on the GPU as the embeddings model of a vector store',
    defaults: { name: 'RWKV Embeddings' },
    codex: {
      categories: ['AI'],
      subcategories: { AI: ['Embeddings'] },
    },
    inputs: [],
    outputs: ['ai_embedding'],
    outputNames: ['Embeddings'],
    credentials: [{ name: CREDENTIAL_NAME, required: true }],
    properties: [
      {
        displayName: 'Options',
        name: 'options',
        type: 'collection',
        placeholder: 'Add Option',
        default: {},
        options: sortedOptions([INITIAL_STATE_OPTION, ...EMBEDDING_OPTIONS]),
      },
    ],
  };

  async supplyData(this: ISupplyDataFunctions, itemIndex: number): Promise<SupplyData> {
    const config = await modelConfigFor(this).catch((err: Error) => {
      throw new NodeOperationError(this.getNode(), `RWKV Model credential: ${err.message}`);
    });
    const options = this.getNodeParameter('options', itemIndex, {}) as EmbeddingOptions;
    try {
      prepareEmbed({ ...options, text: 'x' }); // a bad option fails here, not on the first document
    } catch (err) {
      throw new NodeOperationError(this.getNode(), (err as Error).message, { itemIndex });
    }
    return { response: asLangChainEmbeddings(new RwkvEmbeddings(config, options)) };
  }
}
