"""Score saved models on held-out token files, comparably across vocabularies.

    python3 train/compare_heldout.py --out results.json \
        --eval new@new-text=OUT/default.st:corpus/valid.u16 \
        --eval old@new-text=models/default.st:heldout/new-text.old-vocab.u16 ...

Each --eval is LABEL=MODEL.st:TOKENS.u16, the tokens encoded with that model's own vocab_map
(train/corpus/encode-heldout.ts). Two models with different reduced vocabularies cut the same text
into different tokens, so loss per token is not comparable between them; loss per byte of text is.
Every window of --ctx tokens is scored from the zero state, as train.py's held-out evaluation does,
and the bytes are counted exactly: the UTF-8 length of each predicted token (0 for end of text).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rwkv7_model import RWKV7  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402
from world_vocab import load_world_vocab  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_model(path, device):
    sd, meta = read_safetensors(path)
    vocab_map = sd.pop('vocab_map').numpy().astype(np.int64)
    vocab, C = sd['emb.weight'].shape
    n_layer = sum(1 for k in sd if k.endswith('.ln1.weight'))
    model = RWKV7(vocab, C, n_layer)
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    return model.to(device).eval(), vocab_map, meta


@torch.no_grad()
def score(model, tokens, row_bytes, ctx, batch, device):
    """Total NLL (nats), predicted tokens and their bytes over non-overlapping windows of ctx."""
    n_win = (len(tokens) - 1) // ctx
    data = torch.from_numpy(tokens[: n_win * ctx + 1].astype(np.int64))
    total, count, nbytes = 0.0, 0, 0
    for s in range(0, n_win, batch):
        idx = range(s, min(s + batch, n_win))
        x = torch.stack([data[i * ctx: i * ctx + ctx] for i in idx]).to(device)
        y = torch.stack([data[i * ctx + 1: i * ctx + ctx + 1] for i in idx])
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=device == 'cuda'):
            logits = model(x)
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.to(device).reshape(-1),
                                 reduction='sum').item()
        count += y.numel()
        nbytes += int(row_bytes[y.reshape(-1).numpy()].sum())
    return total, count, nbytes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--eval', action='append', required=True, help='LABEL=MODEL.st:TOKENS.u16')
    p.add_argument('--out', required=True)
    p.add_argument('--ctx', type=int, default=512)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--max-tokens', type=int, default=0, help='score only the first tokens of each file (0: all)')
    args = p.parse_args()
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    vocab = load_world_vocab(os.path.join(REPO, 'vocab', 'rwkv_vocab_v20230424.txt'))
    models = {}
    results = {}
    for spec in args.eval:
        label, rest = spec.split('=', 1)
        model_path, tokens_path = rest.rsplit(':', 1)
        if model_path not in models:
            models[model_path] = load_model(model_path, device)
        model, vocab_map, meta = models[model_path]
        row_bytes = np.array([0 if wid == 0 else len(vocab[int(wid)]) for wid in vocab_map], dtype=np.int64)
        tokens = np.fromfile(tokens_path, dtype='<u2')
        if args.max_tokens:
            tokens = tokens[: args.max_tokens + 1]
        if int(tokens.max()) >= len(vocab_map):
            raise ValueError(f'{tokens_path}: rows exceed the {len(vocab_map)} rows of {model_path}')
        nll, n, nbytes = score(model, tokens, row_bytes, args.ctx, args.batch, device)
        results[label] = {
            'model': model_path, 'model_name': meta.get('name', ''), 'tokens_file': tokens_path,
            'tokens': n, 'bytes': nbytes, 'loss_per_token': nll / n, 'ppl_per_token': math.exp(nll / n),
            'bits_per_byte': nll / math.log(2) / nbytes,
        }
        r = results[label]
        print(f'{label}: {n} tokens, {nbytes} bytes, loss {r["loss_per_token"]:.4f}/token '
              f'(ppl {r["ppl_per_token"]:.2f}), {r["bits_per_byte"]:.4f} bits/byte', flush=True)
    with open(args.out, 'w') as f:
        json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
