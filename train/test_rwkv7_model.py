"""CPU checks of the training model: chunked WKV-7 against the step-by-step recurrence, the
parallel model against the reference RNN over its exported tensors, and the safetensors writer.
Run: python3 -m unittest discover -s train -p 'test_*.py'"""
import json
import os
import struct
import tempfile
import unittest

import torch

from rwkv7_model import RWKV7, ReferenceRNN, export_state_dict, wkv7_chunked, wkv7_sequential
from safetensors_io import read_safetensors, write_safetensors


def random_wkv_inputs(B=2, T=48, H=2, N=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(B, T, H, N, generator=g)
    k = torch.randn(B, T, H, N, generator=g) * 0.5
    v = torch.randn(B, T, H, N, generator=g)
    # log decay in [-exp(-0.5), 0): the model's soft clamp range
    logw = -0.606531 * torch.sigmoid(torch.randn(B, T, H, N, generator=g) * 3)
    kk = torch.nn.functional.normalize(torch.randn(B, T, H, N, generator=g), dim=-1)
    a_gate = torch.sigmoid(torch.randn(B, T, H, N, generator=g))
    return r, logw, k, v, -kk, kk * a_gate


class ChunkedWkvTest(unittest.TestCase):
    def test_matches_sequential_outputs_state_and_gradients(self):
        inputs = [x.double().requires_grad_() for x in random_wkv_inputs()]
        state0 = torch.randn(2, 2, 16, 16, dtype=torch.float64) * 0.1
        y1, s1 = wkv7_sequential(*inputs, state=state0)
        (y1.square().sum() + s1.sum()).backward()
        grads1 = [x.grad.clone() for x in inputs]
        for x in inputs:
            x.grad = None
        y2, s2 = wkv7_chunked(*inputs, state=state0)  # float64 in, float64 algebra
        (y2.square().sum() + s2.sum()).backward()
        self.assertLess(rel_err(y2, y1), 1e-9)
        self.assertLess(rel_err(s2, s1), 1e-9)
        for g2, g1 in zip([x.grad for x in inputs], grads1):
            self.assertLess(rel_err(g2, g1), 1e-8)

    def test_float32_error_is_small(self):
        inputs = random_wkv_inputs(T=64, N=64, H=1)
        y1, _ = wkv7_sequential(*[x.double() for x in inputs])
        y2, _ = wkv7_chunked(*inputs)
        self.assertLess(rel_err(y2.double(), y1), 1e-4)

    def test_rejects_length_not_multiple_of_chunk(self):
        with self.assertRaisesRegex(ValueError, 'multiple of 16'):
            wkv7_chunked(*random_wkv_inputs(T=20))


def rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()


def randomized_model(seed=1, vocab=300, C=128, n_layer=3):
    torch.manual_seed(seed)
    model = RWKV7(vocab, C, n_layer)
    with torch.no_grad():  # zero-initialised matrices would hide wiring mistakes
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if p.dim() <= 2 and 'weight' not in name else 0.05))
    return model


class ModelAgainstReferenceRnnTest(unittest.TestCase):
    def test_parallel_forward_matches_token_by_token_rnn(self):
        model = randomized_model()
        tokens = torch.randint(0, 300, (1, 32), generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            par = model(tokens)[0]
            seq = model(tokens, wkv=wkv7_sequential)[0]
        rnn, _ = ReferenceRNN(export_state_dict(model)).logits(tokens[0].tolist())
        self.assertLess(rel_err(seq, rnn), 1e-5)
        self.assertLess(rel_err(par, rnn), 1e-4)

    def test_official_layout(self):
        sd = export_state_dict(RWKV7(512, 128, 3))
        self.assertEqual(list(sd['blocks.0.att.w1'].shape), [128, 32])
        self.assertEqual(list(sd['blocks.0.att.x_r'].shape), [1, 1, 128])
        self.assertEqual(list(sd['blocks.0.att.r_k'].shape), [2, 64])
        self.assertEqual(list(sd['blocks.1.ffn.key.weight'].shape), [512, 128])
        self.assertIn('blocks.0.ln0.weight', sd)
        self.assertNotIn('blocks.1.ln0.weight', sd)
        self.assertNotIn('blocks.0.att.v0', sd)
        self.assertIn('blocks.1.att.v0', sd)
        golden = os.path.join(os.path.dirname(__file__), '..', '..', 'shared', 'golden', 'v7-tiny.st')
        if os.path.exists(golden):  # same names as the official-layout golden model (LoRA ranks may differ)
            with open(golden, 'rb') as f:
                n = struct.unpack('<Q', f.read(8))[0]
                names = {k for k in json.loads(f.read(n)) if k != '__metadata__'}
            self.assertEqual(names, set(sd))


class SafetensorsTest(unittest.TestCase):
    def test_round_trip_f16_and_i32(self):
        tensors = {'a': torch.randn(3, 4), 'vocab_map': torch.arange(5, dtype=torch.int32)}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, 'm.st')
            write_safetensors(path, tensors, {'name': 'x'}, float_dtype=torch.float16)
            back, meta = read_safetensors(path)
        self.assertEqual(meta, {'name': 'x'})
        self.assertEqual(back['a'].dtype, torch.float16)
        self.assertTrue(torch.equal(back['a'], tensors['a'].half()))
        self.assertTrue(torch.equal(back['vocab_map'], tensors['vocab_map']))


if __name__ == '__main__':
    unittest.main()
