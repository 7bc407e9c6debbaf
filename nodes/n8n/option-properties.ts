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

// n8n lists a collection's options alphabetically, so related settings share a name prefix ("Nucleus: …",
// "Penalty: …") to stand together, and a sampler's own settings show only once that sampler is chosen (a field
// under "Sampler"). The defaults are ai00_server's, kept on purpose: RWKV chat models are tuned and served with
// them (a low Top P of 0.5 and light penalties keep small models on topic); an OpenAI-like setting is temperature 1,
// Top P 1 and no penalties, which these fields' descriptions say how to get.
const ONLY = (...kinds: string[]) => ({ show: { samplerKind: kinds } });
// Nucleus is the default sampler: its settings show until another sampler is picked.
const NUCLEUS = { hide: { samplerKind: ['typical', 'mirostat'] } };

export const SAMPLER_OPTIONS: INodeProperties[] = [
  {
    displayName: 'Sampler',
    name: 'samplerKind',
    type: 'options',
    options: [
      { name: 'Nucleus (Top-P)', value: 'nucleus', description: 'Draw from the most probable tokens covering Top P of the probability (ai00 default)' },
      { name: 'Typical', value: 'typical', description: 'Draw from the tokens whose surprise is closest to the average (Tau of the mass)' },
      { name: 'Mirostat', value: 'mirostat', description: 'Keep the surprise of the text near a target (Mirostat Tau), adapting as it goes' },
    ],
    default: 'nucleus',
    description: "How the next token is drawn; each sampler's own settings appear once it is chosen",
  },
  {
    displayName: 'Temperature',
    name: 'temperature',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 100, numberPrecision: 2 },
    default: d.temperature,
    description: `0–100. Below 1 sharpens the distribution, above 1 flattens it; 0 always takes the most probable token (greedy). Default ${d.temperature}.`,
  },
  {
    displayName: 'Nucleus: Top P',
    name: 'topP',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 1, numberPrecision: 3 },
    default: d.topP,
    displayOptions: NUCLEUS,
    description: `0–1. Keep the most probable tokens until their probabilities add up to this. Default ${d.topP} (ai00's); 1 = no cut, as OpenAI's default.`,
  },
  {
    displayName: 'Nucleus: Top K',
    name: 'topK',
    type: 'number',
    typeOptions: { minValue: 0 },
    default: d.topK,
    displayOptions: { hide: { samplerKind: ['mirostat'] } },
    description: `Keep at most this many of the most probable tokens (0 = no limit). Default ${d.topK}. Also applies to Typical.`,
  },
  {
    displayName: 'Min P',
    name: 'minP',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 0.99, numberPrecision: 3 },
    default: 0,
    displayOptions: { hide: { samplerKind: ['mirostat'] } },
    description: '0–0.99. Drop tokens less probable than this share of the most probable one (0 = off; 0.05 is common)',
  },
  {
    displayName: 'Typical: Tau',
    name: 'tau',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 1, numberPrecision: 3 },
    default: d.tau,
    displayOptions: ONLY('typical'),
    description: `0–1. The probability mass of the most typical tokens to draw from. Default ${d.tau}.`,
  },
  {
    displayName: 'Mirostat: Tau',
    name: 'mirostatTau',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 100, numberPrecision: 3 },
    default: d.mirostatTau,
    displayOptions: ONLY('mirostat'),
    description: `Target surprise in bits per token (0–100): lower is more focused. Default ${d.mirostatTau}.`,
  },
  {
    displayName: 'Mirostat: Eta',
    name: 'mirostatEta',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 1, numberPrecision: 3 },
    default: d.mirostatEta,
    displayOptions: ONLY('mirostat'),
    description: `0–1. How fast Mirostat corrects towards the target. Default ${d.mirostatEta}.`,
  },
  {
    displayName: 'Penalty: Presence',
    name: 'presencePenalty',
    type: 'number',
    typeOptions: { minValue: -100, maxValue: 100, numberPrecision: 3 },
    default: d.presencePenalty,
    description: `-100–100. Subtracted once from the logit of every token already generated (discourages repeats). Default ${d.presencePenalty} (ai00's); 0 = off.`,
  },
  {
    displayName: 'Penalty: Frequency',
    name: 'frequencyPenalty',
    type: 'number',
    typeOptions: { minValue: -100, maxValue: 100, numberPrecision: 3 },
    default: d.frequencyPenalty,
    description: `-100–100. Subtracted from a token's logit for each time it was generated. Default ${d.frequencyPenalty} (ai00's); 0 = off.`,
  },
  {
    displayName: 'Penalty: Decay',
    name: 'penaltyDecay',
    type: 'number',
    typeOptions: { minValue: 0, maxValue: 1, numberPrecision: 6 },
    default: d.penaltyDecay,
    description: `0–1. Each step multiplies the presence and frequency counts by this, so old tokens are forgiven (1 = never). Default ${d.penaltyDecay} (ai00's: a half-life of 200 tokens).`,
  },
  {
    displayName: 'Penalty: Repetition',
    name: 'repetitionPenalty',
    type: 'number',
    typeOptions: { minValue: 0.01, maxValue: 10, numberPrecision: 2 },
    default: 1,
    description: '0.01–10. Divides the positive logits (multiplies the negative ones) of tokens generated within the window (1 = off; e.g. 1.1)',
  },
  {
    displayName: 'Penalty: Repetition Window',
    name: 'repetitionWindow',
    type: 'number',
    typeOptions: { minValue: 1, maxValue: 4096 },
    default: 64,
    description: '1–4096. How many of the last generated tokens the repetition penalty looks back over',
  },
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
    displayName: 'Seed',
    name: 'seed',
    type: 'number',
    typeOptions: { minValue: 0 },
    default: 0,
    description: 'Fixed seed: the same prompt and settings give the same text (leave the option out for a new random draw each time)',
  },
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
