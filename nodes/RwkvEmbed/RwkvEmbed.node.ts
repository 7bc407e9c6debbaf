// n8n node "RWKV Embed": one vector per item, for similarity search and clustering.

import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { prepareEmbed, runEmbed, type EmbedInput } from '../shared/embed-request';
import { EMBEDDING_OPTIONS, INITIAL_STATE_OPTION, sortedOptions } from '../n8n/option-properties';
import { CREDENTIAL_NAME } from '../n8n/credential-config';
import { executeItems } from '../n8n/execute-items';

export class RwkvEmbed implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'RWKV Embed',
    name: 'rwkvEmbed',
    icon: 'file:../../../icons/rwkv-embed.svg',
    group: ['transform'],
    version: 1,
    description: 'Turn text into a vector with a local RWKV model',
    defaults: { name: 'RWKV Embed' },
    inputs: ['main'],
    outputs: ['main'],
    credentials: [{ name: CREDENTIAL_NAME, required: true }],
    properties: [
      { displayName: 'Text', name: 'text', type: 'string', typeOptions: { rows: 3 }, default: '={{ $json.text }}', required: true },
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

  async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
    return executeItems(this, async (i, engine, signal) => {
      const input: EmbedInput = { ...(this.getNodeParameter('options', i, {}) as IDataObject), text: this.getNodeParameter('text', i) };
      const result = await runEmbed(engine, prepareEmbed(input), signal);
      return result as unknown as IDataObject;
    });
  }
}
