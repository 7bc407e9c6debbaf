"""The World vocabulary in Python, for the training script's samples and test fixtures: token
bytes by id, and greedy longest-match encoding over an allowed subset of ids (the same rule as
engine/tokenizer.ts WorldTokenizer.restrict(...).encode, which is the reference)."""
import ast


def load_world_vocab(path):
    """id -> bytes from rwkv_vocab_v20230424.txt (lines: `id python-literal byte-length`)."""
    vocab = {}
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            first, rest = line.index(' '), line.rindex(' ')
            tid, lit, length = int(line[:first]), line[first + 1:rest], int(line[rest + 1:])
            tok = ast.literal_eval(lit)
            tok = tok.encode('utf-8') if isinstance(tok, str) else tok
            if len(tok) != length:
                raise ValueError(f'{path}:{n}: token {tid} has {len(tok)} bytes, the line says {length}')
            vocab[tid] = tok
    return vocab


class RestrictedWorldTokenizer:
    """Greedy longest match over the World tokens listed in vocab_map (row -> World id)."""

    def __init__(self, vocab, vocab_map):
        self.row_bytes = [b'' if wid == 0 else vocab[wid] for wid in vocab_map]
        self.row_of = {}
        for row, wid in enumerate(vocab_map):
            if wid != 0:
                self.row_of[vocab[wid]] = row
        self.max_len = max(len(b) for b in self.row_of)

    def encode(self, text):
        data = text.encode('utf-8')
        rows, i = [], 0
        while i < len(data):
            for n in range(min(self.max_len, len(data) - i), 0, -1):
                row = self.row_of.get(data[i:i + n])
                if row is not None:
                    rows.append(row)
                    i += n
                    break
            else:
                raise ValueError(f'byte 0x{data[i]:02x} at offset {i} has no token')
        return rows

    def decode(self, rows):
        return b''.join(self.row_bytes[r] for r in rows).decode('utf-8', errors='replace')
