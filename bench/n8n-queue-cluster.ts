// n8n in queue mode as an operator runs it on one machine: Redis, an n8n main that takes the webhook calls and
// queues their executions, `n8n worker` processes that run them and, with the engine "server at URL", one
// `rwkv-flow serve` holding the model that every worker's RWKV nodes use (with "in this process" each worker
// loads the model itself). Our package is installed the way n8n loads a custom extension, and `rwkv-flow serve`
// is the packed package's own command. Used by the queue-mode end-to-end test and the `n8n-queue` bench section.

import { spawn, type ChildProcess } from 'child_process';
import { randomUUID } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { freePort, installN8nExtension, n8nCli } from '../test/e2e-support';

export interface QueueClusterOptions {
  /** n8n's bin script (node_modules/n8n/bin/n8n) and a Node that runs it (n8n 2.x: Node >= 24). */
  n8nBin: string;
  nodeBin: string;
  redisBin: string;
  /** 'server': one `rwkv-flow serve` for all workers; 'process': each worker loads the model. */
  engine: 'server' | 'process';
  /** Model file; both modes load the same file with the same settings. */
  model: string;
  /** Weight precision (default f16, the engine's and the credential's default); both modes use the same. */
  precision?: 'f16' | 'f32';
  workers: number;
  /** Executions one worker runs at once (`n8n worker --concurrency`). */
  concurrency: number;
  /** Slots of the engine: the server's, or each worker's own (so with the server, set it to what all workers run at once). */
  maxBatch: number;
  /** Engine settings of the server beyond the model and max batch (its --config), e.g. maxTokensLimit. */
  serverConfig?: Record<string, unknown>;
  /** The API key the server requires (server mode). */
  apiKey?: string;
  /** The published webhook workflows (default: COMPLETION_WEBHOOK). */
  webhooks?: GenerateWebhook[];
  /** Where progress lines go (the bench prints them; the test keeps them quiet). */
  log?: (line: string) => void;
}

export const CREDENTIAL = { id: 'rwkvQueue', name: 'RWKV queue' };
/** How long a process may take to start (n8n migrates its database and loads every node on a slow machine). */
const START_MS = 240000;
/** Output kept per process for failure messages. */
const LOG_TAIL = 20000;

/** A child process whose output is kept (its end) for error messages and read line by line. */
export class ManagedProcess {
  private tail = '';
  private partial = '';
  private readonly exited: Promise<number | null>;
  private readonly lineListeners: ((line: string) => void)[] = [];

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
    const take = (d: Buffer) => {
      const text = d.toString('utf8');
      this.tail = (this.tail + text).slice(-LOG_TAIL);
      const lines = (this.partial + text).split('\n');
      this.partial = lines.pop()!;
      for (const line of lines) for (const f of this.lineListeners) f(line);
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  onLine(f: (line: string) => void): void {
    this.lineListeners.push(f);
  }

  output(): string {
    return this.tail;
  }

  /** Waits for `ready` (polled), failing with the output when the process exits or the time runs out. */
  async waitFor(what: string, ready: () => boolean | Promise<boolean>, ms = START_MS): Promise<void> {
    const end = Date.now() + ms;
    for (;;) {
      if (await ready()) return;
      if (!this.running) throw new Error(`${this.name} exited before ${what}:\n${this.tail.slice(-4000)}`);
      if (Date.now() > end) throw new Error(`${this.name}: no ${what} after ${ms / 1000} s:\n${this.tail.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
  async stop(graceMs = 30000): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Resident memory of a process now and at its peak, from /proc (Linux). */
export function residentMemory(pid: number): { rssBytes: number; peakRssBytes: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!m) throw new Error(`/proc/${pid}/status has no ${field}`);
    return Number(m[1]) * 1024;
  };
  return { rssBytes: kib('VmRSS'), peakRssBytes: kib('VmHWM') };
}

/** The first `command` found on PATH, or undefined. */
export function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, command);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not in this folder
    }
  }
  return undefined;
}

export interface GenerateWebhook {
  id: string;
  /** The webhook's path: POST /webhook/<path> with {prompt, maxTokens}. */
  path: string;
  /** 'lastNode': the Generate node's first item answers; 'streaming': the text as it is generated (n8n's JSON lines). */
  responseMode: 'lastNode' | 'streaming';
  /** Workflow settings, e.g. executionTimeout in seconds. */
  settings?: Record<string, unknown>;
  /** The Generate node's options (seed, logitBias...). */
  options?: Record<string, unknown>;
}

/** A published workflow: Webhook → RWKV Generate on the cluster's credential. */
export function generateWebhookWorkflow(w: GenerateWebhook) {
  return {
    id: w.id,
    name: `rwkv queue ${w.path}`,
    active: false,
    settings: { executionOrder: 'v1', ...w.settings },
    nodes: [
      {
        id: randomUUID(),
        name: 'Webhook',
        type: 'n8n-nodes-base.webhook',
        typeVersion: 2.1,
        position: [0, 0],
        webhookId: `${w.id}-hook`,
        parameters: {
          httpMethod: 'POST',
          path: w.path,
          responseMode: w.responseMode,
          ...(w.responseMode === 'lastNode' ? { responseData: 'firstEntryJson' } : {}),
          options: {},
        },
      },
      {
        id: randomUUID(),
        name: 'Generate',
        type: 'CUSTOM.rwkvGenerate',
        typeVersion: 1,
        position: [240, 0],
        parameters: { inputMode: 'prompt', prompt: '={{ $json.body.prompt }}', maxTokens: '={{ $json.body.maxTokens }}', constraint: 'none', options: w.options ?? {} },
        credentials: { rwkvModelApi: CREDENTIAL },
      },
    ],
    connections: { Webhook: { main: [[{ node: 'Generate', type: 'main', index: 0 }]] } },
  };
}

/** The workflow the bench calls: answers with the Generate node's item. */
export const COMPLETION_WEBHOOK: GenerateWebhook = { id: 'rwkvQueueComplete', path: 'rwkv-complete', responseMode: 'lastNode' };

export interface WebhookAnswer {
  status: number;
  body: string;
}

export class N8nQueueCluster {
  readonly redis: ManagedProcess;
  readonly server: ManagedProcess | undefined;
  readonly serverUrl: string | undefined;
  readonly main: ManagedProcess;
  readonly workers: ManagedProcess[];
  /** Execution ids each worker logged as started, by worker index. */
  readonly started: string[][];
  readonly baseUrl: string;

  private constructor(
    private readonly root: string,
    parts: { redis: ManagedProcess; server?: ManagedProcess; serverUrl?: string; main: ManagedProcess; workers: ManagedProcess[]; baseUrl: string },
  ) {
    this.redis = parts.redis;
    this.server = parts.server;
    this.serverUrl = parts.serverUrl;
    this.main = parts.main;
    this.workers = parts.workers;
    this.baseUrl = parts.baseUrl;
    this.started = this.workers.map((w) => {
      const ids: string[] = [];
      w.onLine((line) => {
        const m = /Worker started execution (\S+)/.exec(line);
        if (m) ids.push(m[1]);
      });
      return ids;
    });
  }

  /** Starts everything (each stopped again if a later part fails to start). */
  static async start(opts: QueueClusterOptions): Promise<N8nQueueCluster> {
    const log = opts.log ?? (() => undefined);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-n8n-queue-'));
    const started: ManagedProcess[] = [];
    const launch = (name: string, command: string, args: string[], env: NodeJS.ProcessEnv) => {
      const p = new ManagedProcess(name, spawn(command, args, { env, cwd: root, stdio: ['ignore', 'pipe', 'pipe'] }));
      started.push(p);
      return p;
    };
    try {
      const ext = installN8nExtension(root);
      const redisPort = await freePort();
      const n8nPort = await freePort();
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        N8N_USER_FOLDER: path.join(root, 'home'),
        N8N_CUSTOM_EXTENSIONS: ext,
        N8N_ENCRYPTION_KEY: 'rwkv-queue-test-key',
        N8N_DIAGNOSTICS_ENABLED: 'false',
        EXECUTIONS_MODE: 'queue',
        QUEUE_BULL_REDIS_HOST: '127.0.0.1',
        QUEUE_BULL_REDIS_PORT: String(redisPort),
        // Workers must not take the main's port (its worker server stays off unless asked for).
        N8N_PORT: String(n8nPort),
        N8N_LISTEN_ADDRESS: '127.0.0.1',
        RWKV_FLOW_IDLE_SECONDS: '600',
        // n8n waits this long at shutdown for executions and webhook answers still open (default 30 s).
        N8N_GRACEFUL_SHUTDOWN_TIMEOUT: '10',
      };

      log(`redis on port ${redisPort}`);
      const redis = launch('redis-server', opts.redisBin, ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', root], env);
      await redis.waitFor('"Ready to accept connections"', () => /Ready to accept connections/.test(redis.output()), 30000);

      let server: ManagedProcess | undefined;
      let serverUrl: string | undefined;
      const engineSettings = { modelPath: opts.model, maxBatch: opts.maxBatch, precision: opts.precision ?? 'f16', device: 'auto' };
      if (opts.engine === 'server') {
        const serverPort = await freePort();
        const cli = path.join(ext, 'bin', 'rwkv-flow');
        const configFile = path.join(root, 'serve-config.json');
        fs.writeFileSync(configFile, JSON.stringify({ device: engineSettings.device, precision: engineSettings.precision, ...opts.serverConfig }));
        const args = [cli, 'serve', '--model', opts.model, '--port', String(serverPort), '--max-batch', String(opts.maxBatch), '--config', configFile];
        server = launch('rwkv-flow serve', opts.nodeBin, args, {
          ...env,
          RWKV_FLOW_API_KEY: opts.apiKey ?? '',
        });
        const s = server;
        await s.waitFor('its listening line', () => /rwkv-flow serve: .* at http:\/\//.test(s.output()));
        serverUrl = `http://127.0.0.1:${serverPort}`;
        log(`rwkv-flow serve at ${serverUrl}: ${s.output().trim().split('\n').pop()}`);
      }

      const { n8n } = n8nCli(opts.nodeBin, opts.n8nBin, () => env);
      const data = opts.engine === 'server' ? { engineMode: 'server', serverUrl, apiKey: opts.apiKey ?? '' } : { engineMode: 'process', ...engineSettings };
      fs.writeFileSync(path.join(root, 'creds.json'), JSON.stringify([{ ...CREDENTIAL, type: 'rwkvModelApi', data }]));
      n8n('import:credentials', `--input=${path.join(root, 'creds.json')}`);
      const webhooks = opts.webhooks ?? [COMPLETION_WEBHOOK];
      const workflows = path.join(root, 'workflows');
      fs.mkdirSync(workflows);
      for (const w of webhooks) fs.writeFileSync(path.join(workflows, `${w.id}.json`), JSON.stringify(generateWebhookWorkflow(w)));
      n8n('import:workflow', '--separate', `--input=${workflows}`);
      for (const w of webhooks) n8n('publish:workflow', `--id=${w.id}`);
      log(`credential and ${webhooks.length} workflows imported and published`);

      // n8n 2.x always runs a task broker (for Code nodes) on a fixed port; each process needs its own.
      const n8nProcess = async (name: string, args: string[]) =>
        launch(name, opts.nodeBin, [opts.n8nBin, ...args], { ...env, N8N_RUNNERS_BROKER_PORT: String(await freePort()) });
      const main = await n8nProcess('n8n main', ['start']);
      const baseUrl = `http://127.0.0.1:${n8nPort}`;
      await main.waitFor('readiness', () => fetch(`${baseUrl}/healthz/readiness`).then((r) => r.ok, () => false));
      log(`n8n main at ${baseUrl} (pid ${main.pid})`);
      const workers: ManagedProcess[] = [];
      for (let i = 0; i < opts.workers; i++) {
        workers.push(await n8nProcess(`n8n worker ${i + 1}`, ['worker', `--concurrency=${opts.concurrency}`]));
      }
      // A worker is ready once it says it waits for jobs; started together, they load their nodes side by side.
      for (const w of workers) await w.waitFor('"ready" line', () => /n8n worker is now ready/i.test(w.output()));
      log(`${workers.length} workers ready (pids ${workers.map((w) => w.pid).join(', ')})`);
      return new N8nQueueCluster(root, { redis, server, serverUrl, main, workers, baseUrl });
    } catch (err) {
      for (const p of started.reverse()) await p.stop(5000);
      fs.rmSync(root, { recursive: true, force: true });
      throw err;
    }
  }

  /** One call of a webhook; the answer as sent. */
  async call(webhookPath: string, prompt: string, maxTokens: number): Promise<WebhookAnswer> {
    const res = await fetch(`${this.baseUrl}/webhook/${webhookPath}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt, maxTokens }),
    });
    return { status: res.status, body: await res.text() };
  }

  /** Every process's output end, for a failure message. */
  logs(): string {
    return [this.server, this.main, ...this.workers]
      .filter((p): p is ManagedProcess => !!p)
      .map((p) => `--- ${p.name} (pid ${p.pid})\n${p.output().slice(-3000)}`)
      .join('\n');
  }

  async stop(): Promise<void> {
    // Workers first (they finish what they run), then the main, then what they used.
    await Promise.all(this.workers.map((w) => w.stop()));
    await this.main.stop();
    await this.server?.stop();
    await this.redis.stop();
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}
