// n8n node "RWKV Choose": rank fixed choices as continuations of a prompt by the model's
// perplexity (classification, routing, multiple choice).

import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { prepareChoose, runChoose, type ChooseInput } from '../shared/choose-request';
import { INITIAL_STATE_OPTION } from '../n8n/option-properties';
import { CREDENTIAL_TEST, testModelCredential } from '../n8n/credential-test';
import { CREDENTIAL_NAME } from '../n8n/credential-config';
import { executeItems } from '../n8n/execute-items';

export class RwkvChoose implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'RWKV Choose',
    name: 'rwkvChoose',
    icon: 'file:../../../icons/rwkv-choose.svg',
    group: ['transform'],
    version: 1,
    description: 'Pick the most likely of several continuations with a local RWKV model',
    defaults: { name: 'RWKV Choose' },
    inputs: ['main'],
    outputs: ['main'],
    credentials: [{ name: CREDENTIAL_NAME, required: true, testedBy: CREDENTIAL_TEST }],
    properties: [
      {
        displayName: 'Prompt',
        name: 'prompt',
        type: 'string',
        typeOptions: { rows: 4 },
        default: '',
        required: true,
        placeholder: 'Review: "Great value."\nSentiment:',
      },
      {
        displayName: 'Choices From',
        name: 'choicesMode',
        type: 'options',
        noDataExpression: true,
        options: [
          { name: 'List', value: 'list', description: 'Choices entered here' },
          { name: 'Item (JSON)', value: 'json', description: 'An array of strings from the item' },
        ],
        default: 'list',
      },
      {
        displayName: 'Choices',
        name: 'choices',
        type: 'fixedCollection',
        typeOptions: { multipleValues: true, sortable: true },
        default: { choice: [{ text: ' positive' }, { text: ' negative' }] },
        displayOptions: { show: { choicesMode: ['list'] } },
        description: 'Leading spaces matter: after "Sentiment:" the model expects " positive"',
        options: [{ displayName: 'Choice', name: 'choice', values: [{ displayName: 'Text', name: 'text', type: 'string', default: '' }] }],
      },
      {
        displayName: 'Choices (JSON)',
        name: 'choicesJson',
        type: 'json',
        default: '={{ $json.choices }}',
        displayOptions: { show: { choicesMode: ['json'] } },
      },
      {
        displayName: 'Options',
        name: 'options',
        type: 'collection',
        placeholder: 'Add Option',
        default: {},
        options: [
          {
            displayName: 'Calibrate',
            name: 'calibrate',
            type: 'boolean',
            default: false,
            description: 'Whether to correct for how likely each choice is without the prompt, so short common words do not always win',
          },
          INITIAL_STATE_OPTION,
        ],
      },
    ],
  };


  methods = { credentialTest: { [CREDENTIAL_TEST]: testModelCredential } };

  async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
    return executeItems(this, async (i, engine, signal) => {
      const mode = this.getNodeParameter('choicesMode', i) as string;
      const input: ChooseInput = { ...(this.getNodeParameter('options', i, {}) as IDataObject), prompt: this.getNodeParameter('prompt', i) };
      input.choices =
        mode === 'list'
          ? ((this.getNodeParameter('choices', i, {}) as { choice?: { text: string }[] }).choice ?? []).map((c) => c.text)
          : this.getNodeParameter('choicesJson', i);
      const result = await runChoose(engine, prepareChoose(input), signal);
      return result as unknown as IDataObject;
    });
  }
}
