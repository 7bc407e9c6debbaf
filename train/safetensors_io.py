"""Minimal safetensors reader/writer (the format: u64 header length, JSON header, raw little-endian
data), so the training scripts need nothing beyond torch and numpy."""
import json
import struct

import numpy as np
import torch

_DTYPES = {torch.float16: ('F16', np.float16), torch.float32: ('F32', np.float32), torch.int32: ('I32', np.int32)}
_BY_NAME = {name: (dt, np_dt) for dt, (name, np_dt) in _DTYPES.items()}


def write_safetensors(path, tensors, metadata=None, float_dtype=torch.float16):
    """Write tensors (floating ones converted to float_dtype) in name order."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header['__metadata__'] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().cpu()
        if t.is_floating_point():
            t = t.to(float_dtype)
        if t.dtype not in _DTYPES:
            raise TypeError(f'tensor {name}: dtype {t.dtype} is not supported (f16, f32, i32)')
        data = t.contiguous().numpy().tobytes()  # little-endian on every machine this runs on
        header[name] = {'dtype': _DTYPES[t.dtype][0], 'shape': list(t.shape), 'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(',', ':')).encode()
    head += b' ' * (-len(head) % 8)  # data starts 8-byte aligned
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop('__metadata__', {})
    out = {}
    for name, h in header.items():
        if h['dtype'] not in _BY_NAME:
            raise TypeError(f'tensor {name}: dtype {h["dtype"]} is not supported')
        dt, np_dt = _BY_NAME[h['dtype']]
        lo, hi = h['data_offsets']
        arr = np.frombuffer(data[lo:hi], dtype=np_dt).reshape(h['shape'])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta
