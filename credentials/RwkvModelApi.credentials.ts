// The model configuration as an n8n credential, so several workflows share one model setup (and
// one loaded engine). Nothing secret is stored; n8n's credential store is simply where shared node
// configuration lives.

import type { ICredentialType, INodeProperties } from 'n8n-workflow';

export class RwkvModelApi implements ICredentialType {
  name = 'rwkvModelApi';

  displayName = 'RWKV Model';

  icon = 'file:../../icons/rwkv-model.svg' as const;

  documentationUrl = 'https://github.com/BlinkDL/RWKV-LM';

  properties: INodeProperties[] = [
    {
      displayName: 'Engine',
      name: 'engineMode',
      type: 'options',
      options: [
        { name: 'In This Process', value: 'process', description: 'Load the model on this host\'s GPU, shared by the workflows of this n8n process' },
        { name: 'Server at URL', value: 'server', description: 'Use the model an `rwkv-flow serve` process holds, shared by every n8n process (queue-mode workers) using it' },
      ],
      default: 'process',
      description: 'Where the model runs. With a server, the settings below are the server\'s (its command line) and are not used here.',
    },
    {
      displayName: 'Server URL',
      name: 'serverUrl',
      type: 'string',
      default: '',
      placeholder: 'http://127.0.0.1:8720',
      description: 'Address of the `rwkv-flow serve` process',
      displayOptions: { show: { engineMode: ['server'] } },
    },
    {
      displayName: 'API Key',
      name: 'apiKey',
      type: 'string',
      typeOptions: { password: true },
      default: '',
      description: 'The key the server was started with (--api-key); empty when it has none',
      displayOptions: { show: { engineMode: ['server'] } },
    },
    {
      displayName: 'Model File',
      name: 'modelPath',
      type: 'string',
      default: '',
      placeholder: '/models/RWKV-x070-World-1.5B.st',
      description: 'Path of an RWKV .st (safetensors) or .pth checkpoint on the n8n host; a relative path is taken inside n8n\'s user folder (~/.n8n). Empty uses the bundled default model.',
    },
    {
      displayName: 'Precision',
      name: 'precision',
      type: 'options',
      options: [
        { name: 'F16 (Half the Memory)', value: 'f16' },
        { name: 'F32', value: 'f32' },
        { name: 'Int8 (Quarter of F32 Memory)', value: 'int8' },
        { name: 'NF4 (4-Bit, GPU Only)', value: 'nf4' },
      ],
      default: 'f16',
      description: 'Weight precision. Int8 (one scale per output row) and NF4 (4 bits, one scale per 64 weights) quantise the large matrices at load; NF4 runs on the GPU only, the CPU backend refuses it',
    },
    {
      displayName: 'Quantised Layers',
      name: 'quantLayers',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description:
        'How many layers, counting from the first, Int8 or NF4 quantises; the later layers keep F16 weights (more memory, less error), the output head stays quantised. 0 = every layer. At most the model\'s layer count.',
      displayOptions: { show: { precision: ['int8', 'nf4'] } },
    },
    {
      displayName: 'Device',
      name: 'device',
      type: 'options',
      options: [
        { name: 'Auto (GPU if the Machine Has One, Else CPU)', value: 'auto' },
        { name: 'GPU (WebGPU)', value: 'gpu' },
        { name: 'CPU (WebAssembly, All Cores)', value: 'cpu' },
      ],
      default: 'auto',
      description: 'Where the model runs. Auto uses the CPU backend when the only WebGPU adapter is a software one (lavapipe) or there is none.',
    },
    {
      displayName: 'Max Batch',
      name: 'maxBatch',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description: 'Requests run on the GPU at once; more wait in the queue. 0 = engine default.',
    },
    {
      displayName: 'Chunk Size',
      name: 'chunkSize',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description: 'Prompt tokens processed per step while other generations run; smaller interleaves more finely with them. 0 = engine default (256).',
    },
    {
      displayName: 'Prefill Chunk Size',
      name: 'prefillChunkSize',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description: 'Prompt tokens processed per step while nothing else generates; larger reads long prompts faster. 0 = engine default (512).',
    },
    {
      displayName: 'Decode Speed Kept',
      name: 'decodeKeep',
      type: 'number',
      typeOptions: { minValue: 0, maxValue: 0.99, numberPrecision: 2 },
      default: 0,
      description: 'Share of their speed running generations keep while a long prompt is read (0.5 = half); higher reads prompts more slowly. 0 = engine default (0.75).',
    },
    {
      displayName: 'GPU Steps per Call',
      name: 'drawSteps',
      type: 'number',
      typeOptions: { minValue: 0, maxValue: 16 },
      default: 0,
      description:
        'Decode steps one GPU call runs back to back, each token drawn on the GPU, while every running generation samples plainly (no grammar, log-probabilities or mirostat). More steps: faster batches; new requests may wait up to two calls. 0 = engine default (4).',
    },
    {
      displayName: 'Cache Size (MiB)',
      name: 'cacheMiB',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description:
        'Memory for remembered prompt prefixes, so a repeated prompt start is not processed again; one bound shared by all loaded states. 0 = engine default (512 MiB).',
    },
    {
      displayName: 'State Folder',
      name: 'stateDir',
      type: 'string',
      default: '',
      description:
        'Folder that holds initial states and conversation states. Every state file a workflow names is a path inside it (no absolute paths, no ".." parts, no symlinks leading out), and n8n\'s file access settings (N8N_RESTRICT_FILE_ACCESS_TO) apply too. Empty = ~/.rwkv-flow/states, created on the first save.',
    },
    {
      displayName: 'Default State',
      name: 'defaultState',
      type: 'string',
      default: '',
      description:
        'A state file in the State Folder (a tuned initial state .st/.pth, or a saved conversation) that requests naming no state start from. Loaded when the model starts, and again whenever it is rebuilt. Empty = the model\'s zero state.',
    },
    {
      displayName: 'Max Queue',
      name: 'maxQueue',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description: 'Requests allowed to wait for a GPU slot before new ones are refused. 0 = engine default.',
    },
    {
      displayName: 'Max Tokens Limit',
      name: 'maxTokensLimit',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description:
        'Most tokens one generation may ask for; a node or item asking for more fails with an error naming the limit, and one leaving Max Tokens empty gets the smaller of 256 and this. 0 = engine default (4096).',
    },
    {
      displayName: 'Request Timeout (Seconds)',
      name: 'requestTimeoutSeconds',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 600,
      description:
        'Deadline of one request (generation, choose, embed, saving a conversation) from its submission, waiting in the queue included; a request past it is cancelled and its item fails with a timeout error. 0 = no deadline.',
    },
    {
      displayName: 'Max Loaded States',
      name: 'maxStates',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description: 'Most named initial states loaded at once; loading one more fails until one is unloaded. 0 = engine default (64).',
    },
    {
      displayName: 'Max Context (RWKV-7b)',
      name: 'maxContext',
      type: 'number',
      typeOptions: { minValue: 0 },
      default: 0,
      description:
        'Models whose state grows per token (RWKV-7b): most tokens of one request, initial state, prompt and output together; each costs memory (README: what a 7b context costs per token). 0 = engine default (4096). Other models ignore it.',
    },
  ];
}
