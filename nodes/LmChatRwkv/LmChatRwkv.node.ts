// n8n AI sub-node "RWKV Chat Model": plugs the local RWKV model into n8n's AI nodes (Basic LLM
// Chain, AI Agent with or without tools, ...) through n8n's AI node SDK.

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
import { RwkvChatModel, type ChatDefaults, type ChatModelOptions } from '../n8n/rwkv-chat-model';
import { optionalJsonObject, optionalText } from '../shared/coerce';
import { checkJsonSchema } from '../shared/json-schema-check';

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
        displayName:
          "This node supplies the model to an AI node. An agent's tools are offered to the model as a choice, constrained to valid JSON, between calling one tool and answering",
        name: 'notice',
        type: 'notice',
        default: '',
      },
      { displayName: 'Max Tokens', name: 'maxTokens', type: 'number', typeOptions: { minValue: 1 }, default: 512 },
      {
        displayName: 'Output Format',
        name: 'outputFormat',
        type: 'options',
        options: [
          { name: 'Text', value: 'text' },
          { name: 'JSON Schema', value: 'jsonSchema', description: 'The answer is JSON valid for the schema' },
          { name: 'BNF Grammar', value: 'grammar', description: 'The answer follows the grammar (not with tools)' },
        ],
        default: 'text',
      },
      {
        displayName: 'JSON Schema',
        name: 'jsonSchema',
        type: 'json',
        default: '{\n  "type": "object",\n  "properties": {\n    "answer": { "type": "string" }\n  },\n  "required": ["answer"]\n}',
        displayOptions: { show: { outputFormat: ['jsonSchema'] } },
      },
      {
        displayName: 'Grammar',
        name: 'grammar',
        type: 'string',
        typeOptions: { rows: 6 },
        default: '',
        placeholder: 'start ::= "yes" | "no"',
        displayOptions: { show: { outputFormat: ['grammar'] } },
      },
      {
        displayName: 'Tool Use',
        name: 'toolUse',
        type: 'options',
        options: [
          { name: 'Model Decides', value: 'auto', description: 'Each reply is a tool call or the answer' },
          {
            name: 'One Tool Call, Then Answer',
            value: 'required',
            description: 'The first reply to a user message calls a tool, the next one answers (helps small models)',
          },
        ],
        default: 'auto',
        description: 'How the model uses the tools of an AI Agent',
      },
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
    const options: ChatModelOptions = {
      toolUse: this.getNodeParameter('toolUse', itemIndex, 'auto') === 'required' ? 'required' : 'auto',
      parametersJsonSchema: sdk.getParametersJsonSchema,
    };
    try {
      const format = this.getNodeParameter('outputFormat', itemIndex, 'text');
      if (format === 'jsonSchema') {
        const schema = optionalJsonObject('jsonSchema', this.getNodeParameter('jsonSchema', itemIndex));
        if (schema === undefined) throw new Error('jsonSchema: is empty');
        checkJsonSchema('jsonSchema', schema);
        options.jsonSchema = schema;
      } else if (format === 'grammar') {
        options.grammar = optionalText('grammar', this.getNodeParameter('grammar', itemIndex));
        if (options.grammar === undefined) throw new Error('grammar: is empty');
      }
    } catch (err) {
      throw new NodeOperationError(this.getNode(), (err as Error).message, { itemIndex });
    }
    return sdk.supplyModel(this, new RwkvChatModel(config, defaults, options));
  }
}
