// PyTorch checkpoints as torch.save writes them: a ZIP with `<prefix>/data.pkl` (the pickled state
// dict) and one `<prefix>/data/<key>` entry of raw little-endian bytes per storage. The pickle is
// read with a small allow-list of globals; tensors reference storages through persistent ids, and
// storages are read on demand, each into a buffer of its own (once, even when views share it).
//
// Every view is checked at open against its storage, before any tensor byte is read or allocated: rank,
// element count (no overflow), stride 0 on a repeated dimension, a view larger than its storage, the
// furthest element inside the storage, storage entries stored (not compressed) and sized numel × dtype,
// and all views together at most twice the bytes of the storages they come from — so reading every
// tensor costs at most about twice the file's size.

import type { Checkpoint, DType, RawTensor } from '../types';
import { bytesPerElement, numElements } from './dtype';
import { readAll, type CheckpointReader, type TensorInfo } from './checkpoint-reader';
import { FileReader } from './file-reader';
import { clip, LOADER_LIMITS, preview } from './limits';
import { PyCallable, PyDict, PyTuple, unpickle } from './pickle';
import { ZipReader, type ZipEntry } from './zip';

/** Legacy storage classes torch still pickles as the storage type. */
const STORAGE_DTYPES: Record<string, DType | undefined> = {
  FloatStorage: 'f32',
  HalfStorage: 'f16',
  BFloat16Storage: 'bf16',
  IntStorage: 'i32',
};

/** The storage class object itself (GLOBAL pushes the class; the persistent id carries it uncalled). */
class StorageType implements PyCallable {
  constructor(readonly className: string) {}
  get qualifiedName(): string {
    return `torch.${this.className}`;
  }
  call(): unknown {
    throw new Error(`pickle: ${this.qualifiedName} cannot be called`);
  }
}

class StorageRef {
  constructor(
    readonly type: StorageType,
    readonly key: string,
    readonly numel: number,
  ) {}
}

class TensorRef {
  constructor(
    readonly storage: StorageRef,
    readonly offset: number,
    readonly shape: number[],
    readonly stride: number[],
  ) {}
}

function callable(qualifiedName: string, fn: (args: PyTuple) => unknown): PyCallable {
  return { qualifiedName, call: fn };
}

function intList(v: unknown, what: string): number[] {
  if (!Array.isArray(v) || v.length > LOADER_LIMITS.maxRank || !v.every((x) => Number.isSafeInteger(x) && x >= 0)) {
    const why = Array.isArray(v) && v.length > LOADER_LIMITS.maxRank ? ` (${v.length} dimensions; at most ${LOADER_LIMITS.maxRank})` : '';
    throw new Error(`pickle: ${what} is not a tuple of non-negative integers${why}: ${preview(v)}`);
  }
  return v as number[];
}

function rebuildTensor(args: PyTuple): TensorRef {
  const [storage, offset, size, stride] = args;
  if (!(storage instanceof StorageRef)) throw new Error('pickle: _rebuild_tensor_v2 called without a storage');
  if (!Number.isSafeInteger(offset) || (offset as number) < 0) throw new Error(`pickle: bad storage offset ${preview(offset)}`);
  return new TensorRef(storage, offset as number, intList(size, 'tensor size'), intList(stride, 'tensor stride'));
}

function findTorchClass(module: string, name: string): PyCallable | undefined {
  const q = `${module}.${name}`;
  if (module === 'collections' && name === 'OrderedDict') {
    return callable(q, (args) => {
      const d = new PyDict();
      if (Array.isArray(args[0])) for (const kv of args[0] as unknown[][]) d.set(kv[0], kv[1]);
      return d;
    });
  }
  if (module === 'torch._utils' && (name === '_rebuild_tensor_v2' || name === '_rebuild_tensor')) {
    return callable(q, rebuildTensor);
  }
  if (module === 'torch._utils' && name === '_rebuild_parameter') {
    return callable(q, (args) => args[0]); // nn.Parameter wraps a tensor; the tensor is all we need
  }
  // Any storage class is accepted here so an unsupported dtype is reported with the tensor's name.
  if (module === 'torch' && name.endsWith('Storage')) {
    return new StorageType(name);
  }
  return undefined;
}

function persistentLoad(pid: unknown): StorageRef {
  // ('storage', storage_type, key, location, numel)
  if (!Array.isArray(pid) || pid[0] !== 'storage' || pid.length < 5) {
    throw new Error(`pickle: unsupported persistent id ${preview(pid)}`);
  }
  const [, type, key, , numel] = pid;
  if (!(type instanceof StorageType)) throw new Error('pickle: persistent id without a storage type');
  if (typeof key !== 'string' || !Number.isSafeInteger(numel) || (numel as number) < 0) {
    throw new Error(`pickle: bad storage reference ${preview(key)} of ${preview(numel)} elements`);
  }
  return new StorageRef(type, key, numel as number);
}

/** Row-major strides of a contiguous tensor. */
function contiguousStrides(shape: number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

function isContiguous(shape: number[], stride: number[]): boolean {
  const expected = contiguousStrides(shape);
  // Strides of size-1 dimensions do not affect the layout.
  return shape.every((d, i) => d === 1 || stride[i] === expected[i]);
}

/** Copy a strided view into a new row-major buffer. */
function gather(storage: Uint8Array, offset: number, shape: number[], stride: number[], elemSize: number): Uint8Array {
  const n = numElements(shape);
  const out = new Uint8Array(n * elemSize);
  const idx = new Array<number>(shape.length).fill(0);
  let src = offset;
  for (let i = 0; i < n; i++) {
    for (let b = 0, from = src * elemSize, to = i * elemSize; b < elemSize; b++) out[to + b] = storage[from + b];
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d]++;
      src += stride[d];
      if (idx[d] < shape[d]) break;
      src -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

/**
 * A view must stay inside its storage and be no larger than it: stride 0 (a broadcast) and other
 * self-overlapping views would turn a few stored bytes into any number of gathered ones. Shapes and
 * strides are at most LOADER_LIMITS.maxRank long and safe integers (intList), so the sums below are exact
 * until they pass the storage's size, where the check stops.
 */
function checkView(ref: TensorRef, what: string): void {
  const { storage, offset, shape, stride } = ref;
  if (stride.length !== shape.length) throw new Error(`${what} has ${shape.length} dims but ${stride.length} strides`);
  if (shape.includes(0)) return; // an empty view touches nothing
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (n > storage.numel) break; // also stops before the product can lose precision
  }
  const zero = shape.findIndex((d, i) => d > 1 && stride[i] === 0);
  if (zero >= 0) throw new Error(`${what} has stride 0 in dimension ${zero} (size ${shape[zero]}); broadcast views are not supported`);
  if (n > storage.numel) {
    throw new Error(`${what} views ${numElements(shape)} elements of a storage of only ${storage.numel} (overlapping views are not supported)`);
  }
  // Highest element index the view touches must lie inside the storage.
  const last = offset + shape.reduce((acc, d, i) => acc + (d - 1) * stride[i], 0);
  if (last >= storage.numel) throw new Error(`${what} reaches element ${last} of a storage of ${storage.numel} elements`);
}

/** Find `<prefix>/data.pkl`; torch names the prefix after the file (official RWKV files use e.g. "RWKV-x070-.../"). */
function findPickle(zip: ZipReader, filePath: string): { prefix: string } {
  const candidates = [...zip.entries.keys()].filter((n) => n === 'data.pkl' || n.endsWith('/data.pkl'));
  const top = candidates.filter((n) => n.split('/').length <= 2);
  if (top.length !== 1) {
    throw new Error(`${filePath}: ZIP archive is not a PyTorch checkpoint (no <name>/data.pkl entry)`);
  }
  return { prefix: top[0].slice(0, top[0].length - 'data.pkl'.length) };
}

interface PthTensor {
  info: TensorInfo;
  ref: TensorRef;
  entry: ZipEntry;
}

/**
 * Open a torch.save() checkpoint of a state dict: the ZIP directory and the pickle are read and every
 * tensor reference is checked now (dtype, storage present and sized right, view inside its storage);
 * storage bytes are read on demand.
 */
export function openPth(filePath: string): CheckpointReader {
  const file = new FileReader(filePath);
  try {
    return openPthFile(file);
  } catch (e) {
    file.close();
    throw e;
  }
}

function openPthFile(file: FileReader): CheckpointReader {
  const filePath = file.path;
  const zip = new ZipReader(file);
  const { prefix } = findPickle(zip, filePath);
  const byteorder = zip.entries.get(`${prefix}byteorder`);
  if (byteorder) {
    if (byteorder.size > 16) throw new Error(`${filePath}: byteorder entry of ${byteorder.size} bytes (expected "little")`);
    const order = Buffer.from(zip.read(byteorder)).toString('latin1').trim();
    if (order !== 'little') throw new Error(`${filePath}: checkpoint byte order is "${order}"; only little-endian is supported`);
  }
  const pklEntry = zip.entries.get(`${prefix}data.pkl`)!;
  const maxPickle = LOADER_LIMITS.pickle.maxBytes;
  if (pklEntry.size > maxPickle) throw new Error(`${filePath}: data.pkl of ${pklEntry.size} bytes is larger than the ${maxPickle} allowed`);
  const pkl = zip.read(pklEntry, { verifyCrc: true, maxInflatedBytes: maxPickle });
  let root: unknown;
  try {
    root = unpickle(pkl, { findClass: findTorchClass, persistentLoad });
  } catch (e) {
    throw new Error(`${filePath}: cannot read the checkpoint's pickle: ${(e as Error).message}`);
  }
  if (!(root instanceof Map)) throw new Error(`${filePath}: checkpoint does not hold a dict of tensors`);

  const index = new Map<string, PthTensor>();
  /** Tensors still to be read per storage: a storage shared by views is read once and kept only while needed. */
  const pending = new Map<string, number>();
  // Views may share a storage (tied weights, slices, a transpose), but all of them together may read
  // at most twice what their storages hold: many views of one storage would multiply its bytes.
  let viewBytes = 0;
  let storageBytes = 0;
  for (const [name, value] of root) {
    if (typeof name !== 'string' || !(value instanceof TensorRef)) continue; // non-tensor entries carry no weights
    const { storage, offset, shape, stride } = value;
    const tensor = `tensor ${clip(name)}`;
    if (index.size === LOADER_LIMITS.maxTensors) throw new Error(`${filePath}: checkpoint holds more than ${LOADER_LIMITS.maxTensors} tensors`);
    if (Buffer.byteLength(name) > LOADER_LIMITS.maxNameBytes) {
      throw new Error(`${filePath}: ${tensor}: name is longer than ${LOADER_LIMITS.maxNameBytes} bytes`);
    }
    const dtype = STORAGE_DTYPES[storage.type.className];
    if (!dtype) {
      throw new Error(
        `${filePath}: ${tensor} uses torch.${clip(storage.type.className, 60)}, which is not supported ` +
          `(supported: ${Object.keys(STORAGE_DTYPES).map((s) => `torch.${s}`).join(', ')})`,
      );
    }
    const key = clip(storage.key, 60);
    const entry = zip.entries.get(`${prefix}data/${storage.key}`);
    if (!entry) throw new Error(`${filePath}: storage ${key} of ${tensor} is missing from the archive`);
    if (entry.method !== 0) {
      throw new Error(`${filePath}: storage ${key} of ${tensor} is compressed (ZIP method ${entry.method}); PyTorch stores tensor data uncompressed`);
    }
    const elem = bytesPerElement(dtype);
    if (entry.size !== storage.numel * elem) {
      throw new Error(`${filePath}: storage ${key} of ${tensor} has ${entry.size} bytes, expected ${storage.numel * elem}`);
    }
    checkView(value, `${filePath}: ${tensor}`);
    if (!pending.has(storage.key)) storageBytes += entry.size;
    viewBytes += numElements(shape) * elem;
    index.set(name, { info: { name, dtype, shape: [...shape] }, ref: value, entry });
    pending.set(storage.key, (pending.get(storage.key) ?? 0) + 1);
  }
  if (viewBytes > 2 * storageBytes) {
    throw new Error(
      `${filePath}: the tensors view ${viewBytes} bytes in total, more than twice the ${storageBytes} bytes of their storages ` +
        '(a storage viewed over and over is not supported)',
    );
  }

  const cache = new Map<string, Uint8Array>();
  let closed = false;
  return {
    format: 'pth',
    path: filePath,
    tensors: new Map([...index].map(([name, t]) => [name, t.info])),
    metadata: {},
    read(name: string): RawTensor {
      const t = index.get(name);
      if (!t) throw new Error(`${filePath}: no tensor named ${name}`);
      if (closed) throw new Error(`${filePath}: checkpoint reader is closed`);
      const { storage, offset, shape, stride } = t.ref;
      const elem = bytesPerElement(t.info.dtype);
      let bytes = cache.get(storage.key);
      if (!bytes) bytes = zip.read(t.entry);
      const left = (pending.get(storage.key) ?? 1) - 1;
      pending.set(storage.key, left);
      if (left > 0) cache.set(storage.key, bytes);
      else cache.delete(storage.key);
      const n = numElements(shape);
      const data = isContiguous(shape, stride)
        ? bytes.subarray(offset * elem, (offset + n) * elem)
        : gather(bytes, offset, shape, stride, elem);
      return { name, dtype: t.info.dtype, shape: [...shape], bytes: data };
    },
    close() {
      if (!closed) file.close();
      closed = true;
    },
  };
}

/** Read every tensor of a torch.save() checkpoint. */
export function readPth(filePath: string): Checkpoint {
  return readAll(openPth(filePath));
}
