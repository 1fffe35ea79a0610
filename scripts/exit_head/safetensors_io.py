"""Reads and writes .safetensors files with numpy, BF16 included.

Written by hand rather than with the `safetensors` package: that package is not packaged for
Debian 12 (the trainer runs on Debian's python3-torch and python3-numpy), and pip-installing it
into the system python needs --break-system-packages (PEP 668). The format is small: an 8-byte
little-endian header length, a JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]},
"__metadata__": {str: str}}, then the raw little-endian tensor data (offsets relative to its start).

BF16 tensors are kept as their uint16 bit patterns (numpy has no bfloat16); bf16_to_f32 and
f32_to_bf16 convert (a BF16 value is the high half of an F32's bits).
"""

import json
import os
import struct
import tempfile

import numpy as np

_NUMPY_DTYPES = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
}
_MAX_HEADER_BYTES = 100 << 20


class SafetensorsError(Exception):
    """A file that is not a readable .safetensors file, naming the file and what is wrong."""


class Bf16:
    """A tensor to write as BF16, given by its uint16 bit patterns (see f32_to_bf16)."""

    def __init__(self, bits):
        self.bits = np.ascontiguousarray(bits, dtype=np.uint16)


def bf16_to_f32(bits):
    """float32 array of the BF16 values whose bit patterns are the uint16 array `bits`."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values):
    """uint16 BF16 bit patterns of float32 `values`, rounded to nearest even (NaN stays NaN)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(bits.view(np.float32))
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def read_safetensors(path):
    """(tensors, metadata) of file `path`: {name: numpy array (BF16 as uint16 bits, see
    bf16_to_f32; read-only, memory-mapped)}, {str: str}. dtype_of() names each tensor's dtype."""
    header, data_start = _read_header(path)
    metadata = header.pop("__metadata__", None) or {}
    file_size = os.path.getsize(path)
    mapped = np.memmap(path, dtype=np.uint8, mode="r") if file_size > data_start else None
    tensors = {}
    for name, info in header.items():
        tensors[name] = _tensor_view(path, name, info, mapped, data_start, file_size)
    return tensors, metadata


def dtype_of(path):
    """{name: safetensors dtype string} of file `path` (e.g. to tell BF16 from an integer type)."""
    header, _ = _read_header(path)
    header.pop("__metadata__", None)
    return {name: info["dtype"] for name, info in header.items()}


def write_safetensors(path, tensors, metadata):
    """Writes {name: float32/float16/int32/int64 array or Bf16} and metadata {str: str} to `path`
    atomically (a temporary file in the same directory, fsync'ed, then renamed over `path`)."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        dtype_name, array = _encode(name, value)
        blob = array.tobytes()
        header[name] = {"dtype": dtype_name, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the package writes it
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(temp, 0o666 & ~umask)  # mkstemp's 0600 would stay on the renamed file
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for blob in blobs:
                f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _read_header(path):
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
        (length,) = struct.unpack("<Q", prefix)
        if length > _MAX_HEADER_BYTES or 8 + length > os.path.getsize(path):
            raise SafetensorsError(f"{path}: header length {length} does not fit the file")
        try:
            header = json.loads(f.read(length).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise SafetensorsError(f"{path}: header is not JSON ({error})") from error
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    return header, 8 + length


def _tensor_view(path, name, info, mapped, data_start, file_size):
    try:
        dtype = _NUMPY_DTYPES[info["dtype"]]
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
    except (KeyError, TypeError, ValueError) as error:
        raise SafetensorsError(f"{path}: tensor {name}: bad or unsupported entry {info}") from error
    count = int(np.prod(shape, dtype=np.int64))
    if begin < 0 or end - begin != count * dtype.itemsize or data_start + end > file_size:
        raise SafetensorsError(f"{path}: tensor {name}: offsets [{begin}, {end}) do not hold "
                               f"{info['dtype']} {list(shape)} inside the file")
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    raw = mapped[data_start + begin:data_start + end]
    return raw.view(dtype).reshape(shape)


def _encode(name, value):
    if isinstance(value, Bf16):
        return "BF16", value.bits
    array = np.ascontiguousarray(value)
    for dtype_name, dtype in _NUMPY_DTYPES.items():
        if dtype_name != "BF16" and array.dtype == dtype:
            return dtype_name, array
    raise SafetensorsError(f"tensor {name}: cannot write dtype {array.dtype}")
