// Option fields that several n8n nodes offer, defined once: the initial state, and the ai00 sampler
// settings with the engine's own defaults (so the editor shows what an empty field means).

import type { INodeProperties } from 'n8n-workflow';
import { AI00_DEFAULTS as d } from '../../engine/samplers/sampler-options';

export const INITIAL_STATE_OPTION: INodeProperties = {
  displayName: 'Initial State',
  name: 'state',
  type: 'string',
  default: '',
  description: 'Name of a state loaded with RWKV Load State',
};

export const SAMPLER_OPTIONS: INodeProperties[] = [
  { displayName: 'Frequency Penalty', name: 'frequencyPenalty', type: 'number', typeOptions: { numberPrecision: 3 }, default: d.frequencyPenalty },
  {
    displayName: 'Logit Bias',
    name: 'logitBias',
    type: 'fixedCollection',
    typeOptions: { multipleValues: true },
    default: {},
    placeholder: 'Add Token',
    description: 'Make tokens more or less likely: a bias is added to their logits (-100 bans a token)',
    options: [
      {
        displayName: 'Token',
        name: 'entry',
        values: [
          {
            displayName: 'Token Given As',
            name: 'kind',
            type: 'options',
            options: [
              { name: 'Text', value: 'text', description: 'Every token of this text gets the bias' },
              { name: 'Token ID', value: 'id', description: 'A World vocabulary token ID' },
            ],
            default: 'text',
          },
          { displayName: 'Token', name: 'token', type: 'string', default: '' },
          { displayName: 'Bias', name: 'bias', type: 'number', typeOptions: { numberPrecision: 2 }, default: -100 },
        ],
      },
    ],
  },
  {
    displayName: 'Min P',
    name: 'minP',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 0.99, numberPrecision: 3 },
    default: 0,
    description: 'Drop tokens less probable than this share of the most probable one (0 = off)',
  },
  { displayName: 'Mirostat Eta', name: 'mirostatEta', type: 'number', typeOptions: { numberPrecision: 3 }, default: d.mirostatEta },
  { displayName: 'Mirostat Tau', name: 'mirostatTau', type: 'number', typeOptions: { numberPrecision: 3 }, default: d.mirostatTau },
  { displayName: 'Penalty Decay', name: 'penaltyDecay', type: 'number', typeOptions: { numberPrecision: 6 }, default: d.penaltyDecay },
  { displayName: 'Presence Penalty', name: 'presencePenalty', type: 'number', typeOptions: { numberPrecision: 3 }, default: d.presencePenalty },
  {
    displayName: 'Repetition Penalty',
    name: 'repetitionPenalty',
    type: 'number',
    typeOptions: { minValue: 0.01, maxValue: 10, numberPrecision: 2 },
    default: 1,
    description: 'Divides the positive logits of tokens generated within the window (1 = off; e.g. 1.1)',
  },
  {
    displayName: 'Repetition Window',
    name: 'repetitionWindow',
    type: 'number',
    typeOptions: { minValue: 1, maxValue: 4096 },
    default: 64,
    description: 'How many of the last generated tokens the repetition penalty looks back over',
  },
  {
    displayName: 'Sampler',
    name: 'samplerKind',
    type: 'options',
    options: [
      { name: 'Nucleus (Top-P)', value: 'nucleus' },
      { name: 'Typical', value: 'typical' },
      { name: 'Mirostat', value: 'mirostat' },
    ],
    default: 'nucleus',
  },
  { displayName: 'Seed', name: 'seed', type: 'number', typeOptions: { minValue: 0 }, default: 0, description: 'Fixed seed for reproducible output' },
  { displayName: 'Tau (Typical)', name: 'tau', type: 'number', typeOptions: { numberPrecision: 3 }, default: d.tau },
  { displayName: 'Temperature', name: 'temperature', type: 'number', typeOptions: { minValue: 0, numberPrecision: 2 }, default: d.temperature },
  { displayName: 'Top K', name: 'topK', type: 'number', typeOptions: { minValue: 0 }, default: d.topK, description: '0 = no limit' },
  { displayName: 'Top P', name: 'topP', type: 'number', typeOptions: { minValue: 0, maxValue: 1, numberPrecision: 3 }, default: d.topP },
];

/** Option fields in the alphabetical order n8n's editor lists them in. */
export function sortedOptions(options: INodeProperties[]): INodeProperties[] {
  return [...options].sort((a, b) => a.displayName.localeCompare(b.displayName));
}

/** Embedding options shared by RWKV Embed and the RWKV Embeddings sub-node. */
export const EMBEDDING_OPTIONS: INodeProperties[] = [
  {
    displayName: 'Layer',
    name: 'layer',
    type: 'number',
    typeOptions: { minValue: 0 },
    default: 0,
    description: 'Layer whose output is the vector (0 = first). Unset uses the engine default (the last layer).',
  },
  {
    displayName: 'Normalize',
    name: 'normalize',
    type: 'boolean',
    default: false,
    description: 'Whether to scale each vector to length 1, so cosine similarity is a dot product',
  },
  {
    displayName: 'Pooling',
    name: 'pooling',
    type: 'options',
    options: [
      { name: 'Last Token', value: 'last', description: "The model's state after the whole text" },
      { name: 'Mean Over Tokens', value: 'mean', description: 'The average over every token of the text (one step per token)' },
    ],
    default: 'last',
  },
];
