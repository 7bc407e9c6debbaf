// The example flows and workflows users start from: the Node-RED flows run in a real Node-RED
// runtime (with the core nodes they use) on a fake engine; the n8n workflows are checked against
// the nodes' descriptions so every parameter they set exists.

import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import type { INodeProperties, INodeType } from 'n8n-workflow';
import { RwkvChoose } from '../nodes/RwkvChoose/RwkvChoose.node';
import { RwkvEmbed } from '../nodes/RwkvEmbed/RwkvEmbed.node';
import { RwkvGenerate } from '../nodes/RwkvGenerate/RwkvGenerate.node';
import { RwkvLoadState } from '../nodes/RwkvLoadState/RwkvLoadState.node';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { FakeEngineProvider } from './nodes-fake-engine';
import { REPO_ROOT } from './paths';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const helper = require('node-red-node-test-helper');
helper.init(require.resolve('node-red'));

type FlowNode = Record<string, any>;
type Msg = Record<string, any>;

const EXAMPLES = path.join(REPO_ROOT, 'examples');
const coreNode = (file: string) => require(require.resolve(`@node-red/nodes/core/${file}`));
const NODES = [
  ...['rwkv-model.js', 'rwkv-generate.js', 'rwkv-choose.js', 'rwkv-embed.js', 'rwkv-load-state.js'].map((f) =>
    require(path.join(REPO_ROOT, 'nodes', 'node-red', f)),
  ),
  coreNode('function/80-template.js'),
  coreNode('function/15-change.js'),
  coreNode('sequence/17-split.js'),
  coreNode('common/90-comment.js'),
];

/** Sources and sinks that need a network or the editor (http, inject, debug) become helper nodes. */
const STAND_INS = new Set(['http in', 'http response', 'inject', 'debug']);

/**
 * The flow as the editor imports it: placed on a tab (examples carry no tab of their own, the
 * editor puts them on the current one), with stand-ins for the network and editor nodes.
 */
function loadFlow(file: string): FlowNode[] {
  const nodes = (JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[]).map((n) => {
    const onTab = n.type === 'rwkv-model' ? n : { ...n, z: 'tab' };
    return STAND_INS.has(n.type) ? { id: n.id, z: 'tab', type: 'helper', name: n.type, wires: n.wires ?? [] } : onTab;
  });
  return [{ id: 'tab', type: 'tab', label: file }, ...nodes];
}

function byType(flow: FlowNode[], file: string, type: string): FlowNode {
  const original = JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[];
  const n = original.find((x) => x.type === type);
  assert.ok(n, `${file} has no ${type} node`);
  return flow.find((x) => x.id === n.id)!;
}

const nextInput = (id: string) => new Promise<Msg>((resolve) => helper.getNode(id).once('input', resolve));

describe('example flows (Node-RED runtime, fake engine)', function () {
  let provider: FakeEngineProvider;
  before(() => helper.startServer());
  after(() => helper.stopServer());
  beforeEach(() => {
    provider = new FakeEngineProvider();
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await helper.unload();
    setEngineProvider(undefined);
  });

  it('every .json under examples/ is a Node-RED flow using the bundled-model config', () => {
    const files = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith('.json'));
    assert.deepStrictEqual(files.sort(), ['json-extraction.json', 'scheduled-batch.json', 'webhook-completion.json']);
    for (const f of files) {
      const flow = JSON.parse(fs.readFileSync(path.join(EXAMPLES, f), 'utf8')) as FlowNode[];
      const models = flow.filter((n) => n.type === 'rwkv-model');
      assert.strictEqual(models.length, 1, f);
      for (const n of flow.filter((x) => x.type.startsWith('rwkv-') && x.type !== 'rwkv-model')) assert.strictEqual(n.model, models[0].id, f);
    }
  });

  it('webhook-completion answers a request with the completion, and a bad request with 400', async () => {
    const file = 'webhook-completion.json';
    const flow = loadFlow(file);
    await helper.load(NODES, flow);
    const httpIn = byType(flow, file, 'http in');
    const httpOut = byType(flow, file, 'http response');

    let reply = nextInput(httpOut.id);
    helper.getNode(httpIn.id).send({ payload: { prompt: 'The capital of France is', maxTokens: 8 } });
    let msg = await reply;
    assert.strictEqual(msg.payload, ' echo: of France is');
    assert.strictEqual(provider.engine.requests[0].maxTokens, 8);
    assert.deepStrictEqual(provider.engine.requests[0].stop, ['\n\n']);

    reply = nextInput(httpOut.id);
    helper.getNode(httpIn.id).send({ payload: { prompt: 'x', maxTokens: -1 } });
    msg = await reply;
    assert.strictEqual(msg.statusCode, 400);
    assert.match(msg.payload.error, /maxTokens: must be an integer ≥ 1/);
  });

  it('scheduled-batch generates for every product at once and joins the results', async () => {
    const file = 'scheduled-batch.json';
    const flow = loadFlow(file);
    await helper.load(NODES, flow);
    const inject = byType(flow, file, 'inject');
    const debug = byType(flow, file, 'debug');
    const original = JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[];
    const products = JSON.parse(original.find((n) => n.type === 'inject')!.payload) as string[];

    provider.engine.options.tokenDelayMs = 5;
    const out = nextInput(debug.id);
    helper.getNode(inject.id).send({ payload: products });
    const msg = await out;
    assert.strictEqual(msg.payload.length, products.length);
    assert.strictEqual(provider.engine.maxActive, products.length, 'the products did not run as one batch');
    assert.ok(provider.engine.requests.every((r, i) => r.prompt.includes(`Input: ${products[i]}\n\nResponse:`)));
  });

  it('json-extraction outputs the parsed object', async () => {
    const file = 'json-extraction.json';
    const flow = loadFlow(file);
    await helper.load(NODES, flow);
    const inject = byType(flow, file, 'inject');
    const debugs = flow.filter((n) => n.type === 'helper' && n.name === 'debug');
    const out = nextInput(debugs[0].id);
    helper.getNode(inject.id).send({ payload: 'Hi, this is Maria.' });
    const msg = await out;
    assert.strictEqual(typeof msg.payload, 'object');
    assert.ok(provider.engine.requests[0].jsonSchema);
  });
});

describe('example n8n workflows', () => {
  const nodeTypes = new Map<string, INodeType>(
    [new RwkvGenerate(), new RwkvChoose(), new RwkvEmbed(), new RwkvLoadState()].map((n) => [`CUSTOM.${n.description.name}`, n]),
  );
  const dir = path.join(EXAMPLES, 'n8n');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));

  it('are the three documented workflows', () => {
    assert.deepStrictEqual(files.sort(), ['json-extraction.json', 'scheduled-batch.json', 'webhook-completion.json']);
  });

  for (const file of files) {
    it(`${file}: RWKV nodes set only parameters they declare, with the credential, and connections are valid`, () => {
      const wf = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as { nodes: FlowNode[]; connections: Record<string, any> };
      const names = new Set(wf.nodes.map((n) => n.name));
      const rwkv = wf.nodes.filter((n) => n.type.startsWith('CUSTOM.'));
      assert.ok(rwkv.length > 0);
      for (const n of rwkv) {
        const type = nodeTypes.get(n.type);
        assert.ok(type, `${file}: unknown node type ${n.type}`);
        assert.deepStrictEqual(Object.keys(n.credentials), ['rwkvModelApi']);
        const props = type.description.properties;
        for (const [key, value] of Object.entries(n.parameters as Record<string, unknown>)) {
          const prop = props.find((p) => p.name === key);
          assert.ok(prop, `${file}: ${n.name} sets unknown parameter ${key}`);
          if (prop.type === 'options' && typeof value === 'string' && !value.startsWith('=')) {
            assert.ok(prop.options!.some((o) => 'value' in o && o.value === value), `${file}: ${key}=${value} is not an option`);
          }
          if (prop.type === 'collection') {
            const allowed = (prop.options as INodeProperties[]).map((o) => o.name);
            for (const sub of Object.keys(value as object)) assert.ok(allowed.includes(sub), `${file}: ${key}.${sub} is not an option`);
          }
        }
      }
      for (const [from, outputs] of Object.entries(wf.connections)) {
        assert.ok(names.has(from), `${file}: connection from unknown node ${from}`);
        for (const branch of outputs.main) for (const c of branch) assert.ok(names.has(c.node), `${file}: connection to unknown node ${c.node}`);
      }
    });
  }
});

/**
 * The editor's view of a node type: its `defaults` as the HTML registers them, evaluated with Node-RED's own
 * validator semantics (RED.validators.regex(re) is `v => re.test(v)`, so a missing field is tested as
 * "undefined").
 */
function editorDefaults(): Map<string, Record<string, { value: unknown; required?: boolean; validate?: (v: unknown, opt?: object) => unknown }>> {
  const types = new Map();
  const RED = {
    nodes: { registerType: (type: string, def: { defaults: object }) => types.set(type, def.defaults) },
    validators: {
      regex: (re: RegExp) => (v: unknown) => re.test(v as string),
      number: () => (v: unknown) => String(v).length !== 0 && !isNaN(Number(v)),
    },
    _: (s: string) => s,
  };
  for (const file of fs.readdirSync(path.join(REPO_ROOT, 'nodes', 'node-red')).filter((f) => f.endsWith('.html'))) {
    const html = fs.readFileSync(path.join(REPO_ROOT, 'nodes', 'node-red', file), 'utf8');
    for (const m of html.matchAll(/<script type="text\/javascript">([\s\S]*?)<\/script>/g)) {
      new Function('RED', '$', m[1])(RED, () => ({}));
    }
  }
  return types;
}

describe('example flows as the Node-RED editor imports them', () => {
  const types = editorDefaults();
  const files = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith('.json'));

  it('every node of ours in every example is valid in the editor (no red triangle)', () => {
    assert.ok(types.has('rwkv-model') && types.has('rwkv-generate'));
    for (const file of files) {
      for (const node of JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[]) {
        const defaults = types.get(node.type);
        if (!defaults) continue;
        for (const [key, d] of Object.entries(defaults)) {
          if (d.required) assert.ok(node[key] !== undefined && node[key] !== '', `${file}: ${node.type}.${key} is required`);
          if (d.validate) assert.strictEqual(d.validate.call(node, node[key], {}), true, `${file}: ${node.type}.${key} = ${JSON.stringify(node[key])} is invalid`);
        }
      }
    }
  });

  it('a field missing from an older flow counts as its default, not as invalid', () => {
    for (const [type, defaults] of types) {
      for (const [key, d] of Object.entries(defaults)) {
        if (d.validate && !d.required && d.value === '') assert.strictEqual(d.validate.call({}, undefined, {}), true, `${type}.${key}`);
      }
    }
  });

  it('all examples share one model configuration node, so importing them all leaves one', () => {
    const configs = files.map((file) => (JSON.parse(fs.readFileSync(path.join(EXAMPLES, file), 'utf8')) as FlowNode[]).filter((n) => n.type === 'rwkv-model'));
    for (const c of configs) assert.strictEqual(c.length, 1);
    for (const [c] of configs) assert.deepStrictEqual(c, configs[0][0]);
    assert.deepStrictEqual(Object.keys(configs[0][0]).filter((k) => k !== 'id' && k !== 'type').sort(), Object.keys(types.get('rwkv-model')!).sort());
  });
});
