// n8n node "RWKV Load State": load / unload / list initial states (state-tuning files, from a path
// or from binary data), save a prompt as a conversation state (CBOR) and load it back. Files are paths
// inside the credential's state folder, and n8n's file access policy applies to them too.

import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { StateFolder } from '../../engine/state-folder';
import { prepareStateOperation, runStateOperation, stateFileOf, type StateOperationInput } from '../shared/state-operation';
import { CREDENTIAL_NAME, modelConfigFor } from '../n8n/credential-config';
import { CREDENTIAL_TEST, testModelCredential } from '../n8n/credential-test';
import { executeItems } from '../n8n/execute-items';
import { checkFileAccess } from './n8n-file-access';

const show = (...operation: string[]) => ({ show: { operation } });

const OPERATION_LABELS = new Map([
  ['load', 'Load Initial State'],
  ['unload', 'Unload State'],
  ['list', 'List States'],
  ['saveConversation', 'Save Conversation'],
  ['loadConversation', 'Load Conversation'],
]);

export class RwkvLoadState implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'RWKV Load State',
    name: 'rwkvLoadState',
    icon: 'file:../../../icons/rwkv-state.svg',
    group: ['transform'],
    version: 1,
    // The operation's label, not its internal value ("Save Conversation", not "saveConversation").
    subtitle: `={{ (${JSON.stringify(Object.fromEntries(OPERATION_LABELS))})[$parameter["operation"]] }}`,
    description: 'Load, save and list RWKV initial states and conversation states',
    defaults: { name: 'RWKV Load State' },
    inputs: ['main'],
    outputs: ['main'],
    credentials: [{ name: CREDENTIAL_NAME, required: true, testedBy: CREDENTIAL_TEST }],
    properties: [
      {
        displayName: 'Operation',
        name: 'operation',
        type: 'options',
        noDataExpression: true,
        options: [
          { name: OPERATION_LABELS.get('load')!, value: 'load', action: 'Load an initial state' },
          { name: OPERATION_LABELS.get('unload')!, value: 'unload', action: 'Unload a state' },
          { name: OPERATION_LABELS.get('list')!, value: 'list', action: 'List loaded states' },
          { name: OPERATION_LABELS.get('saveConversation')!, value: 'saveConversation', action: 'Save a prompt as a conversation state' },
          { name: OPERATION_LABELS.get('loadConversation')!, value: 'loadConversation', action: 'Load a conversation state' },
        ],
        default: 'load',
      },
      {
        displayName: 'State Name',
        name: 'name',
        type: 'string',
        default: '',
        required: true,
        description: 'Name other RWKV nodes use in their Initial State option',
        displayOptions: show('load', 'unload', 'loadConversation'),
      },
      {
        displayName: 'Source',
        name: 'sourceType',
        type: 'options',
        options: [
          { name: 'File Path', value: 'path' },
          { name: 'Binary Data', value: 'binary' },
        ],
        default: 'path',
        displayOptions: show('load'),
      },
      {
        displayName: 'State File',
        name: 'source',
        type: 'string',
        default: '',
        required: true,
        placeholder: 'rwkv-7-chat-tuned.pth',
        description: 'Path inside the State Folder of the RWKV Model credential (no absolute path, no ".." parts)',
        displayOptions: { show: { operation: ['load'], sourceType: ['path'] } },
      },
      {
        displayName: 'Binary Property',
        name: 'binaryPropertyName',
        type: 'string',
        default: 'data',
        displayOptions: { show: { operation: ['load'], sourceType: ['binary'] } },
      },
      {
        displayName: 'Prompt',
        name: 'prompt',
        type: 'string',
        typeOptions: { rows: 4 },
        default: '',
        required: true,
        description: 'Text run through the model; its resulting state is saved',
        displayOptions: show('saveConversation'),
      },
      {
        displayName: 'Conversation File',
        name: 'file',
        type: 'string',
        default: '',
        required: true,
        placeholder: 'support-chat.cbor',
        description:
          'Path inside the State Folder of the RWKV Model credential (no absolute path, no ".." parts). Saving replaces only an earlier conversation file.',
        displayOptions: show('saveConversation', 'loadConversation'),
      },
      {
        displayName: 'Start From State',
        name: 'state',
        type: 'string',
        default: '',
        description: 'Initial state to run the prompt from (optional)',
        displayOptions: show('saveConversation'),
      },
    ],
  };


  methods = { credentialTest: { [CREDENTIAL_TEST]: testModelCredential } };

  async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
    // The folder the engine confines files to; n8n's policy is checked on the real paths inside it.
    let folder: StateFolder | undefined;
    return executeItems(this, async (i, engine) => {
      const operation = this.getNodeParameter('operation', i) as string;
      const param = (name: string) => this.getNodeParameter(name, i, '');
      const input: StateOperationInput = { operation };
      if (operation === 'load') {
        input.name = param('name');
        input.source =
          param('sourceType') === 'binary'
            ? await this.helpers.getBinaryDataBuffer(i, this.getNodeParameter('binaryPropertyName', i) as string)
            : param('source');
      } else if (operation === 'unload') {
        input.name = param('name');
      } else if (operation === 'saveConversation') {
        Object.assign(input, { prompt: param('prompt'), file: param('file'), state: param('state') });
      } else if (operation === 'loadConversation') {
        Object.assign(input, { file: param('file'), name: param('name') });
      }
      const op = prepareStateOperation(input);
      const file = stateFileOf(op);
      if (file !== undefined) {
        const config = await modelConfigFor(this);
        // With a server the file is in the server's state folder, on its host, which the server confines.
        if (!config.server) {
          folder ??= new StateFolder(config.stateDir);
          await checkFileAccess(this.helpers, folder, file);
        }
      }
      const result = await runStateOperation(engine, op);
      return result as unknown as IDataObject;
    });
  }
}
