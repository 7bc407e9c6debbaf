// n8n node "RWKV Generate": completion of a prompt or reply to chat messages, optionally
// constrained by a BNF grammar or a JSON Schema, streamed to the webhook response when n8n streams.

import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { prepareGenerate, type GenerateInput } from '../shared/generate-request';
import { runGeneration } from '../shared/generation-runner';
import { INITIAL_STATE_OPTION, SAMPLER_OPTIONS, sortedOptions } from '../n8n/option-properties';
import { CREDENTIAL_NAME } from '../n8n/credential-config';
import { executeItems } from '../n8n/execute-items';

interface GenerateOptions {
  system?: string;
  stop?: string;
  samplerKind?: string;
  temperature?: number;
  topP?: number;
  topK?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  penaltyDecay?: number;
  tau?: number;
  mirostatTau?: number;
  mirostatEta?: number;
  seed?: number;
  state?: string;
  enableStreaming?: boolean;
  logprobs?: boolean;
  topLogprobs?: number;
}

export class RwkvGenerate implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'RWKV Generate',
    name: 'rwkvGenerate',
    icon: 'file:../../../icons/rwkv-generate.svg',
    group: ['transform'],
    version: 1,
    subtitle: '={{ $parameter["inputMode"] === "prompt" ? "completion" : "chat" }}',
    description: 'Generate text with a local RWKV model on the GPU',
    defaults: { name: 'RWKV Generate' },
    inputs: ['main'],
    outputs: ['main'],
    credentials: [{ name: CREDENTIAL_NAME, required: true }],
    properties: [
      {
        displayName: 'Input',
        name: 'inputMode',
        type: 'options',
        noDataExpression: true,
        options: [
          { name: 'Prompt', value: 'prompt', description: 'Continue a text' },
          { name: 'Chat Messages', value: 'messages', description: 'Reply to messages listed here' },
          { name: 'Chat Messages (JSON)', value: 'messagesJson', description: 'Reply to an array of {role, content} from the item' },
        ],
        default: 'prompt',
      },
      {
        displayName: 'Prompt',
        name: 'prompt',
        type: 'string',
        typeOptions: { rows: 4 },
        default: '',
        required: true,
        displayOptions: { show: { inputMode: ['prompt'] } },
      },
      {
        displayName: 'Messages',
        name: 'messages',
        type: 'fixedCollection',
        typeOptions: { multipleValues: true, sortable: true },
        default: { message: [{ role: 'user', content: '' }] },
        displayOptions: { show: { inputMode: ['messages'] } },
        options: [
          {
            displayName: 'Message',
            name: 'message',
            values: [
              {
                displayName: 'Role',
                name: 'role',
                type: 'options',
                options: [
                  { name: 'System', value: 'system' },
                  { name: 'User', value: 'user' },
                  { name: 'Assistant', value: 'assistant' },
                ],
                default: 'user',
              },
              { displayName: 'Content', name: 'content', type: 'string', typeOptions: { rows: 2 }, default: '' },
            ],
          },
        ],
      },
      {
        displayName: 'Messages (JSON)',
        name: 'messagesJson',
        type: 'json',
        default: '={{ $json.messages }}',
        description: 'An array of {role, content}; roles system, user, assistant',
        displayOptions: { show: { inputMode: ['messagesJson'] } },
      },
      {
        displayName: 'Max Tokens',
        name: 'maxTokens',
        type: 'number',
        typeOptions: { minValue: 1 },
        default: 256,
      },
      {
        displayName: 'Constrain Output',
        name: 'constraint',
        type: 'options',
        options: [
          { name: 'No', value: 'none' },
          { name: 'BNF Grammar', value: 'grammar' },
          { name: 'JSON Schema', value: 'jsonSchema', description: 'The parsed JSON is returned in the "json" field' },
        ],
        default: 'none',
      },
      {
        displayName: 'Grammar',
        name: 'grammar',
        type: 'string',
        typeOptions: { rows: 6 },
        default: '',
        placeholder: 'start ::= "yes" | "no"',
        displayOptions: { show: { constraint: ['grammar'] } },
      },
      {
        displayName: 'JSON Schema',
        name: 'jsonSchema',
        type: 'json',
        default: '{\n  "type": "object",\n  "properties": {\n    "answer": { "type": "string" }\n  },\n  "required": ["answer"]\n}',
        displayOptions: { show: { constraint: ['jsonSchema'] } },
      },
      {
        displayName: 'Options',
        name: 'options',
        type: 'collection',
        placeholder: 'Add Option',
        default: {},
        options: sortedOptions([
          {
            displayName: 'Enable Streaming',
            name: 'enableStreaming',
            type: 'boolean',
            default: true,
            description: 'Whether to stream the text to a webhook or chat trigger whose response mode is "Streaming"',
          },
          INITIAL_STATE_OPTION,
          {
            displayName: 'Log Probabilities',
            name: 'logprobs',
            type: 'boolean',
            default: false,
            description: 'Whether to output each token\'s log-probability ("logprobs") and their mean ("meanLogprob", a confidence score)',
          },
          {
            displayName: 'Top Alternatives',
            name: 'topLogprobs',
            type: 'number',
            typeOptions: { minValue: 0, maxValue: 20 },
            default: 0,
            description: 'How many of the most probable tokens to list at each step, with their log-probabilities (implies Log Probabilities)',
          },
          ...SAMPLER_OPTIONS,
          {
            displayName: 'Stop Sequences',
            name: 'stop',
            type: 'string',
            default: '',
            placeholder: '\\n\\n or ["\\n\\n", "###"]',
            description: 'One stop sequence (\\n for a newline) or a JSON array of them',
          },
          { displayName: 'System Prompt', name: 'system', type: 'string', typeOptions: { rows: 2 }, default: '', description: 'Put first in chat mode' },
        ]),
      },
    ],
  };

  async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
    const streaming = typeof this.isStreaming === 'function' && this.isStreaming();
    return executeItems(this, async (i, engine, signal) => {
      const options = this.getNodeParameter('options', i, {}) as GenerateOptions;
      const prepared = prepareGenerate(generateInput(this, i, options));
      if (!(streaming && options.enableStreaming !== false)) {
        return (await runGeneration(engine, prepared, { signal })) as unknown as IDataObject;
      }
      // Chunks go out in order (sendChunk is async in recent n8n). Streaming is best effort: a
      // client that went away must not fail the generation, whose result is the node's output.
      let chunks: Promise<unknown> = Promise.resolve();
      const send = (type: 'begin' | 'item' | 'end' | 'error', text?: string) => {
        chunks = chunks.then(() => this.sendChunk(type, i, text)).catch(() => undefined);
      };
      send('begin');
      try {
        const result = await runGeneration(engine, prepared, {
          signal,
          onEvent: (e) => e.type === 'delta' && e.text !== '' && send('item', e.text),
        });
        send('end');
        return result as unknown as IDataObject;
      } catch (err) {
        send('error', (err as Error).message);
        throw err;
      } finally {
        await chunks;
      }
    });
  }
}

function generateInput(ctx: IExecuteFunctions, i: number, options: GenerateOptions): GenerateInput {
  const mode = ctx.getNodeParameter('inputMode', i) as string;
  const constraint = ctx.getNodeParameter('constraint', i, 'none') as string;
  const { enableStreaming: _stream, ...sampling } = options;
  const input: GenerateInput = { ...sampling, maxTokens: ctx.getNodeParameter('maxTokens', i) };
  if (mode === 'prompt') input.prompt = ctx.getNodeParameter('prompt', i);
  else if (mode === 'messages') input.messages = (ctx.getNodeParameter('messages', i, {}) as { message?: unknown[] }).message ?? [];
  else input.messages = ctx.getNodeParameter('messagesJson', i);
  if (constraint === 'grammar') input.grammar = ctx.getNodeParameter('grammar', i);
  if (constraint === 'jsonSchema') input.jsonSchema = ctx.getNodeParameter('jsonSchema', i);
  return input;
}
