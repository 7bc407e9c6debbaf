"""Train the bundled default RWKV-7 model on the corpus made by train/corpus/build-corpus.ts.

    python3 train/train.py --corpus .carry/corpus --out OUT [--minutes 7]

Runs for a fixed wall-clock budget (cosine learning rate over elapsed time, so a slower or
faster GPU still ends its schedule), saves OUT/default.st (f16 + vocab_map) periodically and at
the end, then writes into OUT:
  results.json   corpus size, parameters, steps, held-out loss/perplexity, unigram baseline, samples
  expected.st    logits of the reference RNN (fp32, over the saved f16 weights) for a fixed text,
                 for the engine test (test/default-model.test.ts)
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rwkv7_model import CHUNK, RWKV7, ReferenceRNN, export_state_dict, lora_dims, wkv7_chunked, wkv7_sequential  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from world_vocab import RestrictedWorldTokenizer, load_world_vocab  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECTED_TEXT = 'The quick brown fox jumps over the lazy dog. PostgreSQL is a relational database'
SAMPLE_PROMPTS = [
    'The PostgreSQL server',
    'In Rust, a reference is',
    'In Python, a list is',
    'The history of',
]
WEIGHTS_LICENCE = 'Apache-2.0'  # the package's licence (package.json); test/model-licence.test.ts checks it


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--corpus', default=os.path.join(REPO, '.carry', 'corpus'))
    p.add_argument('--out', required=True)
    p.add_argument('--minutes', type=float, default=7.0, help='training wall-clock budget')
    p.add_argument('--max-steps', type=int, default=0, help='stop after this many steps (0: time only)')
    p.add_argument('--n-embd', type=int, default=320)
    p.add_argument('--n-layer', type=int, default=8)
    p.add_argument('--ctx', type=int, default=512)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--lr', type=float, default=2e-3)
    p.add_argument('--lr-final', type=float, default=1e-4)
    p.add_argument('--warmup', type=int, default=40)
    p.add_argument('--save-every', type=float, default=90.0, help='seconds between checkpoints')
    p.add_argument('--eval-tokens', type=int, default=0, help='limit held-out tokens (0: all)')
    p.add_argument('--sample-tokens', type=int, default=100)
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--work', default='/tmp/rwkv7-train', help='where default.st is written whole')
    p.add_argument('--part-mib', type=float, default=15.0,
                   help='also copy default.st into OUT as default.st.NN parts of at most this size (0: whole file)')
    return p.parse_args()


def log(msg):
    print(f'[{time.strftime("%H:%M:%S")}] {msg}', flush=True)


def load_corpus(d):
    train = np.fromfile(os.path.join(d, 'train.u16'), dtype='<u2')
    valid = np.fromfile(os.path.join(d, 'valid.u16'), dtype='<u2')
    vocab_map = np.fromfile(os.path.join(d, 'vocab_map.i32'), dtype='<i4')
    with open(os.path.join(d, 'meta.json')) as f:
        meta = json.load(f)
    if vocab_map[0] != 0 or len(vocab_map) != meta['rows']:
        raise ValueError(f'{d}: vocab_map must start with World id 0 and have meta.rows={meta["rows"]} entries')
    if int(train.max()) >= len(vocab_map) or int(valid.max()) >= len(vocab_map):
        raise ValueError(f'{d}: token rows exceed the {len(vocab_map)} vocabulary rows')
    return train, valid, vocab_map, meta


def param_groups(model, weight_decay):
    decay, plain, fast = [], [], []
    for name, p in model.named_parameters():
        if 'att.w0' in name:
            fast.append(p)  # official: the decay bias learns at 2x
        elif p.squeeze().dim() >= 2 and name.endswith('.weight'):
            decay.append(p)
        else:
            plain.append(p)
    return [
        {'params': decay, 'weight_decay': weight_decay, 'lr_scale': 1.0},
        {'params': plain, 'weight_decay': 0.0, 'lr_scale': 1.0},
        {'params': fast, 'weight_decay': 0.0, 'lr_scale': 2.0},
    ]


def publish(path, out_dir, part_mib):
    """Copy the model file into out_dir, in parts when the transfer limits files' size."""
    with open(path, 'rb') as f:
        data = f.read()
    name = os.path.basename(path)
    if part_mib <= 0:
        chunks = {name: data}
    else:
        size = int(part_mib * (1 << 20))
        chunks = {f'{name}.{i:02d}': data[o:o + size] for i, o in enumerate(range(0, len(data), size))}
    for part, blob in chunks.items():
        with open(os.path.join(out_dir, part + '.tmp'), 'wb') as f:
            f.write(blob)
        os.replace(os.path.join(out_dir, part + '.tmp'), os.path.join(out_dir, part))


def corpus_licences(corpus_meta):
    """[{pkg, version, licence}] of the training text, as build-corpus.ts recorded it in meta.json."""
    return [{'pkg': p['pkg'], 'version': p['version'], 'licence': p['licence']} for p in corpus_meta['packages']]


def save_model(model, vocab_map, path, info, corpus_meta):
    sd = export_state_dict(model)
    sd['vocab_map'] = torch.from_numpy(vocab_map.astype(np.int32))
    meta = {
        'name': 'rwkv7-permissive-docs',
        'architecture': 'RWKV-7 x070',
        'licence': WEIGHTS_LICENCE,
        'corpus': 'English documentation from Debian 12 packages, public domain or under permissive licences '
                  '(PSF, PostgreSQL, MIT, BSD, Apache-2.0); per package in corpus_licences and train/CORPUS.md',
        'corpus_licences': json.dumps(corpus_licences(corpus_meta), separators=(',', ':')),
        'vocab': f'reduced World vocabulary: {len(vocab_map)} rows, vocab_map[row] = World token id '
                 '(rwkv_vocab_v20230424); encode with WorldTokenizer.restrict(vocab_map)',
        'trainer': 'train/train.py',
    }
    meta.update({k: str(v) for k, v in info.items()})
    tmp = path + '.tmp'
    write_safetensors(tmp, sd, meta, float_dtype=torch.float16)
    os.replace(tmp, path)


@torch.no_grad()
def evaluate(model, valid, ctx, batch, device, train_counts):
    """Mean NLL (nats/token) of the model and of the add-one unigram over the same targets:
    non-overlapping windows of ctx+1 tokens, each from the zero state."""
    n_win = (len(valid) - 1) // ctx
    data = torch.from_numpy(valid[: n_win * ctx + 1].astype(np.int64))
    unigram = torch.from_numpy(train_counts + 1.0)
    unigram_logp = torch.log(unigram / unigram.sum())
    total, total_uni, count = 0.0, 0.0, 0
    model.eval()
    for s in range(0, n_win, batch):
        idx = torch.arange(s, min(s + batch, n_win))
        x = torch.stack([data[i * ctx: i * ctx + ctx] for i in idx.tolist()]).to(device)
        y = torch.stack([data[i * ctx + 1: i * ctx + ctx + 1] for i in idx.tolist()])
        with autocast(device):
            logits = model(x)
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.to(device).reshape(-1), reduction='sum').item()
        total_uni += -unigram_logp[y.reshape(-1)].sum().item()
        count += y.numel()
    model.train()
    return total / count, total_uni / count, count


def autocast(device):
    if device == 'cuda':
        return torch.autocast('cuda', dtype=torch.bfloat16)
    return torch.autocast('cpu', enabled=False)


def sample(rnn, tok, prompt, n, rng, temperature=1.0, top_p=0.7):
    """Nucleus sampling from the reference RNN over the saved weights (what the engine runs)."""
    state = rnn.zero_state()
    rows = tok.encode(prompt)
    for r in rows:
        logits, state = rnn.step(r, state)
    out = []
    for _ in range(n):
        logits[0] = -float('inf')  # no end-of-text inside a sample
        probs = torch.softmax(logits / temperature, dim=-1)
        sp, si = torch.sort(probs, descending=True)
        cut = int((torch.cumsum(sp, 0) < top_p).sum().item()) + 1
        keep = sp[:cut] / sp[:cut].sum()
        r = int(si[int(torch.multinomial(keep, 1, generator=rng).item())].item())
        out.append(r)
        logits, state = rnn.step(r, state)
    return prompt + tok.decode(out)


def self_check(device):
    """The chunked WKV on this device against the step-by-step recurrence (fp32)."""
    g = torch.Generator().manual_seed(0)
    B, T, H, N = 2, 64, 2, 64
    r, k, v = [torch.randn(B, T, H, N, generator=g) for _ in range(3)]
    logw = -0.606531 * torch.sigmoid(torch.randn(B, T, H, N, generator=g) * 3)
    kk = F.normalize(torch.randn(B, T, H, N, generator=g), dim=-1)
    a = torch.sigmoid(torch.randn(B, T, H, N, generator=g))
    args = [t.to(device) for t in (r, logw, k * 0.5, v, -kk, kk * a)]
    y1, _ = wkv7_sequential(*[t.double() for t in args])
    with autocast(device):  # as in training: the WKV must stay fp32 under autocast
        y2, _ = wkv7_chunked(*args)
    err = ((y2.double() - y1).norm() / y1.norm()).item()
    log(f'self-check: chunked WKV-7 vs recurrence on {device}: rel err {err:.2e}')
    if err > 1e-3:
        raise RuntimeError(f'chunked WKV-7 disagrees with the recurrence on {device}: rel err {err}')


def main():
    args = parse_args()
    if args.ctx % CHUNK != 0:
        raise ValueError(f'--ctx {args.ctx} must be a multiple of {CHUNK}')
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # keep the fp32 WKV algebra exact-ish
    log(f'torch {torch.__version__} on {device}' + (f' ({torch.cuda.get_device_name()})' if device == 'cuda' else ''))
    self_check(device)

    train, valid, vocab_map, meta = load_corpus(args.corpus)
    V = len(vocab_map)
    train_counts = np.bincount(train, minlength=V).astype(np.float64)
    log(f'corpus: train {len(train)} tokens, valid {len(valid)} tokens, {V} rows')
    data = torch.from_numpy(train.astype(np.int32)).to(device)

    model = RWKV7(V, args.n_embd, args.n_layer).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f'model: n_embd {args.n_embd}, n_layer {args.n_layer}, heads {model.H}x64, vocab {V}, '
        f'LoRA {lora_dims(args.n_embd)}, {n_params / 1e6:.2f}M parameters')
    groups = param_groups(model, 0.1)
    opt_kwargs = {'fused': True} if device == 'cuda' else {}
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.99), eps=1e-8, **opt_kwargs)

    budget = args.minutes * 60
    t0 = time.time()
    last_save = t0
    step, tokens_seen, losses = 0, 0, []
    offsets_hi = len(train) - args.ctx - 1
    span = torch.arange(args.ctx + 1, device=device)
    info = {}
    while True:
        elapsed = time.time() - t0
        if elapsed >= budget or (args.max_steps and step >= args.max_steps):
            break
        frac = elapsed / budget
        lr = args.lr_final + 0.5 * (args.lr - args.lr_final) * (1 + math.cos(math.pi * frac))
        lr *= min(1.0, (step + 1) / args.warmup)
        for g in opt.param_groups:
            g['lr'] = lr * g['lr_scale']
        starts = torch.randint(0, offsets_hi, (args.batch, 1), device=device)
        seq = data[starts + span].long()
        x, y = seq[:, :-1], seq[:, 1:]
        with autocast(device):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x.numel()
        if step % 20 == 0 or step == 1:
            cur = loss.item()
            losses.append((step, round(cur, 4)))
            log(f'step {step} loss {cur:.4f} lr {lr:.2e} {tokens_seen / (time.time() - t0) / 1e3:.0f}k tok/s '
                f'elapsed {time.time() - t0:.0f}s')
        if time.time() - last_save > args.save_every:
            info = {'steps': step, 'tokens': tokens_seen}
            save_model(model, vocab_map, os.path.join(args.work, 'default.st'), info, meta)
            publish(os.path.join(args.work, 'default.st'), args.out, args.part_mib)
            last_save = time.time()
            log(f'saved checkpoint at step {step}')
    train_seconds = time.time() - t0
    info = {'steps': step, 'tokens': tokens_seen, 'n_params': n_params}
    model_path = os.path.join(args.work, 'default.st')
    save_model(model, vocab_map, model_path, info, meta)
    publish(model_path, args.out, args.part_mib)
    log(f'trained {step} steps, {tokens_seen} tokens in {train_seconds:.0f}s; saved {model_path}')

    held = valid[: args.eval_tokens + 1] if args.eval_tokens else valid
    nll, nll_uni, n_eval = evaluate(model, held, args.ctx, args.batch, device, train_counts)
    log(f'held-out: loss {nll:.4f} ppl {math.exp(nll):.2f}; unigram loss {nll_uni:.4f} ppl {math.exp(nll_uni):.2f} '
        f'over {n_eval} tokens')

    # Everything below runs on the saved f16 weights, as the engine will.
    sd, _ = read_safetensors(model_path)
    sd.pop('vocab_map')
    rnn = ReferenceRNN(sd)
    vocab = load_world_vocab(os.path.join(REPO, 'vocab', 'rwkv_vocab_v20230424.txt'))
    tok = RestrictedWorldTokenizer(vocab, vocab_map.tolist())
    rows = tok.encode(EXPECTED_TEXT)
    expected_logits, state = rnn.logits(rows)
    write_safetensors(os.path.join(args.out, 'expected.st'), {
        'tokens': torch.tensor(rows, dtype=torch.int32),
        'logits': expected_logits,
        **{f'state.{i}.att_x': s[0] for i, s in enumerate(state)},
        **{f'state.{i}.att_kv': s[1] for i, s in enumerate(state)},
        **{f'state.{i}.ffn_x': s[2] for i, s in enumerate(state)},
    }, {'text': EXPECTED_TEXT, 'source': 'train/rwkv7_model.py ReferenceRNN, fp32 over default.st f16 weights'},
        float_dtype=torch.float32)
    seq_nll = F.cross_entropy(expected_logits[:-1], torch.tensor(rows[1:])).item()
    log(f'expected logits for {len(rows)} tokens written (their loss {seq_nll:.3f})')

    rng = torch.Generator().manual_seed(args.seed)
    samples = []
    for prompt in SAMPLE_PROMPTS:
        text = sample(rnn, tok, prompt, args.sample_tokens, rng)
        samples.append(text)
        log(f'sample: {text!r}')

    results = {
        'device': torch.cuda.get_device_name() if device == 'cuda' else 'cpu',
        'torch': torch.__version__,
        'config': {'n_embd': args.n_embd, 'n_layer': args.n_layer, 'head_size': 64, 'ffn': 4 * args.n_embd,
                   'lora': lora_dims(args.n_embd), 'vocab_rows': V, 'ctx': args.ctx, 'batch': args.batch,
                   'lr': args.lr, 'lr_final': args.lr_final, 'warmup': args.warmup, 'minutes': args.minutes},
        'n_params': n_params,
        'corpus': {'train_tokens': int(len(train)), 'valid_tokens': int(len(valid)),
                   'train_bytes': meta['train']['bytes'], 'valid_bytes': meta['valid']['bytes']},
        'steps': step, 'tokens_seen': tokens_seen, 'train_seconds': round(train_seconds, 1),
        'loss_curve': losses,
        'heldout': {'tokens': n_eval, 'loss': nll, 'ppl': math.exp(nll), 'unigram_loss': nll_uni,
                    'unigram_ppl': math.exp(nll_uni),
                    'bits_per_byte': nll * n_eval / math.log(2) / (meta['valid']['bytes'] * n_eval / len(valid))},
        'samples': samples,
    }
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    log('done')


if __name__ == '__main__':
    main()
