"""RWKV-7 (x070) in plain PyTorch: the training model, a chunked WKV-7 for it, and a reference
one-token-at-a-time forward over an exported state dict.

Tensor names, shapes and initialisation follow the official x070 layout (BlinkDL/RWKV-LM,
RWKV-v7/train_temp/src/model.py): LoRA matrices stored [in, out], big matrices [out, in] as
torch Linear, mixing coefficients [1, 1, C], r_k [H, N], layer 0 without v0/v1/v2, emb.weight
normalised by blocks.0.ln0 before use, group norm eps 64e-5, WKV state [head, value, key].
Works with torch >= 1.13 (Debian's python3-torch for CPU checks, the device's torch 2.x for training).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

GROUP_NORM_EPS = 64e-5
CHUNK = 16  # WKV chunk length: decays are >= exp(-exp(-0.5)) ~ 0.545, so 1/prod(w) <= 1.7e4 in a chunk


def lora_dims(C):
    """The official suggested LoRA ranks for n_embd C (decay, a, value residual, gate)."""
    r = lambda f: max(32, int(round(f * (C ** 0.5) / 32) * 32))
    return {'w': r(2.5), 'a': r(2.5), 'v': r(1.7), 'g': r(5.0)}


def wkv7_sequential(r, logw, k, v, a, b, state=None):
    """Reference WKV-7 recurrence, one step at a time. Inputs [B,T,H,N] fp32; logw = log(decay).
    state [B,H,N(value),N(key)]: S = S*w + (S a) b^T + v k^T;  y = S r.  Returns y, final state."""
    B, T, H, N = r.shape
    S = torch.zeros(B, H, N, N, dtype=r.dtype, device=r.device) if state is None else state
    w = torch.exp(logw)
    ys = []
    for t in range(T):
        sa = torch.einsum('bhij,bhj->bhi', S, a[:, t])
        S = S * w[:, t, :, None, :] + sa[..., None] * b[:, t, :, None, :] + v[:, t, :, :, None] * k[:, t, :, None, :]
        ys.append(torch.einsum('bhij,bhj->bhi', S, r[:, t]))
    return torch.stack(ys, dim=1), S


def at_least_f32(x):
    return x if x.dtype == torch.float64 else x.float()


def wkv7_chunked(r, logw, k, v, a, b, state=None):
    """The same recurrence computed chunk by chunk (exact up to rounding), with only T/CHUNK
    sequential steps. Within a chunk with cumulative decay G_t = prod_{s<=t} w_s, the in-chunk
    values u_t = S_{t-1} a_t solve a unit lower-triangular system, and then outputs and the next
    chunk's state are matrix products. T must be a multiple of CHUNK."""
    if _t_not_multiple(r):
        raise ValueError(f'wkv7_chunked: sequence length {r.shape[1]} is not a multiple of {CHUNK}')
    # The in-chunk factors reach 1/prod(w) ~ 1e4: bf16 matmuls (autocast) would lose the result.
    with torch.autocast(device_type=r.device.type, enabled=False):
        return _wkv7_chunked_f32(r, logw, k, v, a, b, state)


def _t_not_multiple(r):
    return r.shape[1] % CHUNK != 0


def _wkv7_chunked_f32(r, logw, k, v, a, b, state):
    B, T, H, N = r.shape
    nC, L = T // CHUNK, CHUNK
    # [B,H,nC,L,N]
    r, logw, k, v, a, b = [at_least_f32(x).view(B, nC, L, H, N).permute(0, 3, 1, 2, 4) for x in (r, logw, k, v, a, b)]
    cum = torch.cumsum(logw, dim=3)            # log G_t (inclusive)
    cum_prev = cum - logw                      # log G_{t-1}
    cum_last = cum[:, :, :, -1:, :]            # log G_L
    a_dec = a * torch.exp(cum_prev)            # a_t * G_{t-1}
    r_dec = r * torch.exp(cum)                 # r_t * G_t
    inv = torch.exp(-cum)
    b_inv, k_inv = b * inv, k * inv            # b_s / G_s, k_s / G_s
    to_end = torch.exp(cum_last - cum)
    b_end, k_end = b * to_end, k * to_end      # b_s * G_L / G_s
    strict = torch.tril(torch.ones(L, L, dtype=torch.bool, device=r.device), -1)
    incl = torch.tril(torch.ones(L, L, dtype=torch.bool, device=r.device), 0)
    zero = torch.zeros((), dtype=r.dtype, device=r.device)
    A_ab = torch.where(strict, a_dec @ b_inv.transpose(-1, -2), zero)
    A_ak = torch.where(strict, a_dec @ k_inv.transpose(-1, -2), zero)
    A_rb = torch.where(incl, r_dec @ b_inv.transpose(-1, -2), zero)
    A_rk = torch.where(incl, r_dec @ k_inv.transpose(-1, -2), zero)
    eye = torch.eye(L, dtype=r.dtype, device=r.device)
    M = eye - A_ab
    # u = M^-1 (a_dec S0^T + A_ak v): the S0-independent parts are solved for all chunks at once.
    W1 = torch.linalg.solve_triangular(M, a_dec, upper=False, unitriangular=True)          # [.., L, Nk]
    W2 = torch.linalg.solve_triangular(M, A_ak @ v, upper=False, unitriangular=True)       # [.., L, Nv]
    SV = v.transpose(-1, -2) @ k_end                                                        # [.., Nv, Nk]
    decay_last = torch.exp(cum_last)                                                        # [.., 1, Nk]
    S = torch.zeros(B, H, N, N, dtype=r.dtype, device=r.device) if state is None else at_least_f32(state)
    S0s, Us = [], []
    for c in range(nC):
        S0s.append(S)
        U = W1[:, :, c] @ S.transpose(-1, -2) + W2[:, :, c]                                 # [B,H,L,Nv]
        Us.append(U)
        S = S * decay_last[:, :, c] + U.transpose(-1, -2) @ b_end[:, :, c] + SV[:, :, c]
    S0 = torch.stack(S0s, dim=2)                                                            # [B,H,nC,Nv,Nk]
    U = torch.stack(Us, dim=2)                                                              # [B,H,nC,L,Nv]
    y = r_dec @ S0.transpose(-1, -2) + A_rb @ U + A_rk @ v                                  # [B,H,nC,L,Nv]
    return y.permute(0, 2, 3, 1, 4).reshape(B, T, H, N), S


class TimeMix(nn.Module):
    def __init__(self, C, H, n_layer, layer_id):
        super().__init__()
        self.layer_id, self.H, self.N = layer_id, H, C // H
        N = self.N
        d = lora_dims(C)
        with torch.no_grad():
            ratio_0_to_1 = layer_id / max(n_layer - 1, 1)
            ratio_1_to_almost0 = 1.0 - layer_id / n_layer
            ddd = (torch.arange(C, dtype=torch.float32) / C).view(1, 1, C)
            self.x_r = nn.Parameter(1.0 - torch.pow(ddd, 0.2 * ratio_1_to_almost0))
            self.x_w = nn.Parameter(1.0 - torch.pow(ddd, 0.9 * ratio_1_to_almost0))
            self.x_k = nn.Parameter(1.0 - torch.pow(ddd, 0.7 * ratio_1_to_almost0))
            self.x_v = nn.Parameter(1.0 - torch.pow(ddd, 0.7 * ratio_1_to_almost0))
            self.x_a = nn.Parameter(1.0 - torch.pow(ddd, 0.9 * ratio_1_to_almost0))
            self.x_g = nn.Parameter(1.0 - torch.pow(ddd, 0.2 * ratio_1_to_almost0))
            n = torch.arange(C, dtype=torch.float32)
            linear = n / (C - 1) - 0.5
            zigzag = ((n % N) - (N - 1) / 2) / ((N - 1) / 2)
            zigzag = zigzag * zigzag.abs()
            www = -6 + 6 * (n / (C - 1)) ** (1 + 1 * ratio_0_to_1 ** 0.3)
            self.w1 = nn.Parameter(torch.zeros(C, d['w']))
            self.w2 = nn.Parameter(ortho(torch.zeros(d['w'], C), 0.1))
            self.w0 = nn.Parameter((www + 0.5 + zigzag * 2.5).view(1, 1, C))
            self.a1 = nn.Parameter(torch.zeros(C, d['a']))
            self.a2 = nn.Parameter(ortho(torch.zeros(d['a'], C), 0.1))
            self.a0 = nn.Parameter((torch.zeros(C) - 0.19 + zigzag * 0.3 + linear * 0.4).view(1, 1, C))
            if layer_id > 0:  # the value residual mixes in layer 0's v, so layer 0 has no gate for it
                self.v1 = nn.Parameter(torch.zeros(C, d['v']))
                self.v2 = nn.Parameter(ortho(torch.zeros(d['v'], C), 0.1))
                self.v0 = nn.Parameter((torch.zeros(C) + 0.73 - linear * 0.4).view(1, 1, C))
            self.g1 = nn.Parameter(torch.zeros(C, d['g']))
            self.g2 = nn.Parameter(ortho(torch.zeros(d['g'], C), 0.1))
            self.k_k = nn.Parameter((torch.zeros(C) + 0.71 - linear * 0.1).view(1, 1, C))
            self.k_a = nn.Parameter(torch.zeros(1, 1, C) + 1.02)
            self.r_k = nn.Parameter(torch.zeros(H, N) - 0.04)
        self.receptance = nn.Linear(C, C, bias=False)
        self.key = nn.Linear(C, C, bias=False)
        self.value = nn.Linear(C, C, bias=False)
        self.output = nn.Linear(C, C, bias=False)
        self.ln_x = nn.GroupNorm(H, C, eps=GROUP_NORM_EPS)
        with torch.no_grad():
            self.receptance.weight.uniform_(-0.5 / C ** 0.5, 0.5 / C ** 0.5)
            self.key.weight.uniform_(-0.05 / C ** 0.5, 0.05 / C ** 0.5)
            self.value.weight.uniform_(-0.5 / C ** 0.5, 0.5 / C ** 0.5)
            self.output.weight.zero_()

    def forward(self, x, v_first, wkv=wkv7_chunked):
        B, T, C = x.shape
        H, N = self.H, self.N
        xx = F.pad(x, (0, 0, 1, -1)) - x  # previous token minus current
        xr, xw, xk, xv, xa, xg = [x + xx * m for m in (self.x_r, self.x_w, self.x_k, self.x_v, self.x_a, self.x_g)]
        r = self.receptance(xr)
        # decay w = exp(-exp(wl)) with wl soft-clamped below -0.5, so log w = -exp(wl)
        wl = -F.softplus(-(self.w0 + torch.tanh(xw @ self.w1) @ self.w2)) - 0.5
        k = self.key(xk)
        v = self.value(xv)
        if self.layer_id == 0:
            v_first = v
        else:
            v = v + (v_first - v) * torch.sigmoid(self.v0 + (xv @ self.v1) @ self.v2)
        a = torch.sigmoid(self.a0 + (xa @ self.a1) @ self.a2)
        g = torch.sigmoid(xg @ self.g1) @ self.g2
        kk = F.normalize((k * self.k_k).view(B, T, H, N), dim=-1, p=2.0).view(B, T, C)
        k = k * (1 + (a - 1) * self.k_a)
        heads = lambda t: t.float().view(B, T, H, N)
        y, _ = wkv(heads(r), heads(-torch.exp(wl.float())), heads(k), heads(v), heads(-kk), heads(kk * a))
        y = self.ln_x(y.reshape(B * T, C)).view(B, T, C)
        y = y + ((r.float() * k.float() * self.r_k.view(1, 1, C)).view(B, T, H, N).sum(-1, keepdim=True) * heads(v)).view(B, T, C)
        return self.output(y * g), v_first


class ChannelMix(nn.Module):
    def __init__(self, C, ffn, n_layer, layer_id):
        super().__init__()
        with torch.no_grad():
            ratio_1_to_almost0 = 1.0 - layer_id / n_layer
            ddd = (torch.arange(C, dtype=torch.float32) / C).view(1, 1, C)
            self.x_k = nn.Parameter(1.0 - torch.pow(ddd, ratio_1_to_almost0 ** 4))
        self.key = nn.Linear(C, ffn, bias=False)
        self.value = nn.Linear(ffn, C, bias=False)
        with torch.no_grad():
            self.key.weight.uniform_(-0.5 / C ** 0.5, 0.5 / C ** 0.5)
            self.value.weight.zero_()

    def forward(self, x):
        xx = F.pad(x, (0, 0, 1, -1)) - x
        return self.value(torch.relu(self.key(x + xx * self.x_k)) ** 2)


class Block(nn.Module):
    def __init__(self, C, H, ffn, n_layer, layer_id):
        super().__init__()
        self.layer_id = layer_id
        if layer_id == 0:
            self.ln0 = nn.LayerNorm(C)
        self.ln1 = nn.LayerNorm(C)
        self.ln2 = nn.LayerNorm(C)
        self.att = TimeMix(C, H, n_layer, layer_id)
        self.ffn = ChannelMix(C, ffn, n_layer, layer_id)

    def forward(self, x, v_first, wkv=wkv7_chunked):
        if self.layer_id == 0:
            x = self.ln0(x)
        dx, v_first = self.att(self.ln1(x), v_first, wkv)
        x = x + dx
        return x + self.ffn(self.ln2(x)), v_first


class RWKV7(nn.Module):
    def __init__(self, vocab, C, n_layer, head_size=64, ffn=None):
        super().__init__()
        if C % head_size != 0:
            raise ValueError(f'n_embd {C} is not a multiple of head size {head_size}')
        self.vocab, self.C, self.n_layer, self.H = vocab, C, n_layer, C // head_size
        ffn = ffn or 4 * C
        self.emb = nn.Embedding(vocab, C)
        self.blocks = nn.ModuleList([Block(C, self.H, ffn, n_layer, i) for i in range(n_layer)])
        self.ln_out = nn.LayerNorm(C)
        self.head = nn.Linear(C, vocab, bias=False)
        with torch.no_grad():  # official: small embedding, head scaled by sqrt(vocab/C)
            self.emb.weight.uniform_(-1e-4, 1e-4)
            scale = 0.5 * math.sqrt(vocab / C) if vocab > C else 0.5
            nn.init.orthogonal_(self.head.weight, gain=scale)

    def forward(self, idx, wkv=wkv7_chunked):
        x = self.emb(idx)
        v_first = None
        for block in self.blocks:
            x, v_first = block(x, v_first, wkv)
        return self.head(self.ln_out(x))


def ortho(x, scale):
    gain = math.sqrt(x.shape[0] / x.shape[1]) if x.shape[0] > x.shape[1] else 1
    nn.init.orthogonal_(x, gain=gain * scale)
    return x


def export_state_dict(model):
    """Parameters under their official names, as float32 CPU tensors."""
    return {name: p.detach().float().cpu().clone() for name, p in model.state_dict().items()}


class ReferenceRNN:
    """One token at a time from the zero state, fp32, written from the official RWKV_x070 RNN
    equations over a state dict (so it checks the exported tensors, not the training module)."""

    def __init__(self, sd):
        self.w = {k: v.float() for k, v in sd.items()}
        self.n_layer = sum(1 for k in sd if k.endswith('.ln1.weight'))
        self.H, self.N = self.w['blocks.0.att.r_k'].shape
        self.C = self.H * self.N

    def zero_state(self):
        C, H, N = self.C, self.H, self.N
        return [[torch.zeros(C), torch.zeros(H, N, N), torch.zeros(C)] for _ in range(self.n_layer)]

    def step(self, token, state):
        w, H, N, C = self.w, self.H, self.N, self.C
        ln = lambda x, p: F.layer_norm(x, (C,), w[p + '.weight'], w[p + '.bias'], 1e-5)
        x = ln(w['emb.weight'][token], 'blocks.0.ln0')
        v_first = None
        for i in range(self.n_layer):
            p = f'blocks.{i}.att.'
            xa = ln(x, f'blocks.{i}.ln1')
            xx = state[i][0] - xa
            state[i][0] = xa
            mix = lambda name: xa + xx * w[p + name].view(C)
            xr, xw, xk, xv, xaa, xg = mix('x_r'), mix('x_w'), mix('x_k'), mix('x_v'), mix('x_a'), mix('x_g')
            r = w[p + 'receptance.weight'] @ xr
            k = w[p + 'key.weight'] @ xk
            v = w[p + 'value.weight'] @ xv
            decay = torch.exp(-0.606531 * torch.sigmoid(w[p + 'w0'].view(C) + torch.tanh(xw @ w[p + 'w1']) @ w[p + 'w2']))
            a = torch.sigmoid(w[p + 'a0'].view(C) + (xaa @ w[p + 'a1']) @ w[p + 'a2'])
            g = torch.sigmoid(xg @ w[p + 'g1']) @ w[p + 'g2']
            kk = F.normalize((k * w[p + 'k_k'].view(C)).view(H, N), dim=-1, p=2.0).view(C)
            k = k * (1 + (a - 1) * w[p + 'k_a'].view(C))
            if i == 0:
                v_first = v
            else:
                v = v + (v_first - v) * torch.sigmoid(w[p + 'v0'].view(C) + (xv @ w[p + 'v1']) @ w[p + 'v2'])
            S = state[i][1]
            vk = v.view(H, N, 1) @ k.view(H, 1, N)
            ab = (-kk).view(H, N, 1) @ (kk * a).view(H, 1, N)
            S = S * decay.view(H, 1, N) + S @ ab + vk
            state[i][1] = S
            y = (S @ r.view(H, N, 1)).view(1, C)
            y = F.group_norm(y, H, w[p + 'ln_x.weight'], w[p + 'ln_x.bias'], GROUP_NORM_EPS).view(C)
            y = y + ((r * k * w[p + 'r_k'].view(C)).view(H, N).sum(-1, keepdim=True) * v.view(H, N)).view(C)
            x = x + w[p + 'output.weight'] @ (y * g)
            f = f'blocks.{i}.ffn.'
            xf = ln(x, f'blocks.{i}.ln2')
            xx = state[i][2] - xf
            state[i][2] = xf
            kf = torch.relu(w[f + 'key.weight'] @ (xf + xx * w[f + 'x_k'].view(C))) ** 2
            x = x + w[f + 'value.weight'] @ kf
        return w['head.weight'] @ ln(x, 'ln_out'), state

    @torch.no_grad()
    def logits(self, tokens):
        state = self.zero_state()
        out = []
        for t in tokens:
            y, state = self.step(int(t), state)
            out.append(y)
        return torch.stack(out), state
