// n8n AI sub-node "RWKV Chat Model": plugs the local RWKV model into n8n's AI nodes (Basic LLM
// Chain, AI Agent without tools, ...) through n8n's AI node SDK.

import {
  NodeOperationError,
  type INodeType,
  type INodeTypeDescription,
  type ISupplyDataFunctions,
  type SupplyData,
} from 'n8n-workflow';
import { loadAiNodeSdk } from '../n8n/ai-node-sdk';
import { CREDENTIAL_NAME, modelConfigFor } from '../n8n/credential-config';
import { INITIAL_STATE_OPTION, SAMPLER_OPTIONS, sortedOptions } from '../n8n/option-properties';
import { RwkvChatModel, type ChatDefaults } from '../n8n/rwkv-chat-model';

export class LmChatRwkv implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'RWKV Chat Model',
    name: 'lmChatRwkv',
    icon: 'file:../../../icons/rwkv-chat-model.svg',
    group: ['transform'],
    version: 1,
    description: 'A local RWKV model on the GPU as the chat model of an AI chain or agent',
    defaults: { name: 'RWKV Chat Model' },
    codex: {
      categories: ['AI'],
      subcategories: { AI: ['Language Models', 'Root Nodes'], 'Language Models': ['Chat Models (Recommended)'] },
    },
    inputs: [],
    outputs: ['ai_languageModel'],
    outputNames: ['Model'],
    credentials: [{ name: CREDENTIAL_NAME, required: true }],
    properties: [
      {
        displayName: 'This node supplies the model to an AI node; it cannot call tools, so use it with chains or an agent without tools',
        name: 'notice',
        type: 'notice',
        default: '',
      },
      { displayName: 'Max Tokens', name: 'maxTokens', type: 'number', typeOptions: { minValue: 1 }, default: 512 },
      {
        displayName: 'Options',
        name: 'options',
        type: 'collection',
        placeholder: 'Add Option',
        default: {},
        options: sortedOptions([INITIAL_STATE_OPTION, ...SAMPLER_OPTIONS]),
      },
    ],
  };

  async supplyData(this: ISupplyDataFunctions, itemIndex: number): Promise<SupplyData> {
    const sdk = loadAiNodeSdk();
    if (!sdk) {
      throw new NodeOperationError(this.getNode(), 'RWKV Chat Model needs an n8n version with the AI node SDK (@n8n/ai-node-sdk, n8n 2.x)');
    }
    const config = await modelConfigFor(this).catch((err: Error) => {
      throw new NodeOperationError(this.getNode(), `RWKV Model credential: ${err.message}`);
    });
    const defaults: ChatDefaults = {
      ...(this.getNodeParameter('options', itemIndex, {}) as ChatDefaults),
      maxTokens: this.getNodeParameter('maxTokens', itemIndex),
    };
    return sdk.supplyModel(this, new RwkvChatModel(config, defaults));
  }
}
