"""The grader's wire format between a sandboxed submission and the trusted harness: no pickle.

A message is JSON (the structure) followed by raw bytes (the tensors' data). Only plain values cross:
``None``, bools, ints, floats, strings, lists, tuples, dicts, tensors (any dtype, any shape, with
their ``requires_grad`` flag), ``torch.dtype``, ``nn.Linear`` (as its weights) and, for anything
else, an :class:`Opaque` stand-in that carries only the type's name and a short repr. Decoding never
imports or calls anything named by the data, so a hostile submission can send back only values.

Frames on a pipe: an 8-byte big-endian length, then the message. Sizes are capped (``MAX_FRAME``).
This file is copied into each sandbox, next to ``worker.py``: it imports only the standard library
and torch.
"""

from __future__ import annotations

import json
import os
import struct

import torch

MAX_FRAME = 64 * 2**20  # bytes: the largest answer a submission may send back
MAX_DEPTH = 32
MAX_ITEMS = 100_000
MAX_TEXT = 4000  # characters kept of a string, an error message or an opaque repr

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


class WireError(ValueError):
    """A message that breaks the format or its limits."""


class Opaque:
    """What the harness sees of a value the wire cannot carry (a generator, a custom object...)."""

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return f"<{self.type_name} from the submission: {self.text}>"


def encode(value, requires_grad_ok: bool = True) -> bytes:
    """``value`` -> one message (JSON header + tensor bytes)."""
    blobs: list[bytes] = []
    count = [0]

    def walk(v, depth: int):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
            raise WireError(f"the value is nested deeper than {MAX_DEPTH} or holds more than {MAX_ITEMS} items")
        if v is None or type(v) in (bool, int, float):
            if type(v) is int and abs(v) >= 2**63:
                return {"$big": str(v)[:MAX_TEXT]}
            return v
        if type(v) is str:
            return v[:MAX_TEXT]
        if isinstance(v, torch.Tensor):
            t = v.detach().to("cpu").contiguous()
            if t.dtype not in _DTYPES.values():
                return {"$opaque": [f"Tensor[{t.dtype}]", ""]}
            blobs.append(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            return {"$t": len(blobs) - 1, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                    "grad": bool(requires_grad_ok and v.requires_grad)}
        if isinstance(v, torch.dtype):
            return {"$dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.nn.Linear):
            return {"$linear": [walk(v.weight, depth + 1), walk(v.bias, depth + 1)]}
        if type(v) in (list, tuple) or isinstance(v, torch.Size):
            items = [walk(x, depth + 1) for x in v]
            return items if type(v) is list else {"$tuple": items}
        if type(v) is dict:
            return {"$dict": [[walk(k, depth + 1), walk(x, depth + 1)] for k, x in v.items()]}
        try:
            text = repr(v)[:200]
        except Exception:  # noqa: BLE001  (a hostile __repr__ must not break the encoder)
            text = "?"
        return {"$opaque": [type(v).__name__[:100], text]}

    header = json.dumps(walk(value, 0)).encode()
    sizes = [len(b) for b in blobs]
    head = json.dumps({"sizes": sizes}).encode()
    message = struct.pack(">II", len(head), len(header)) + head + header + b"".join(blobs)
    if len(message) > MAX_FRAME:
        raise WireError(f"the value takes {len(message) / 2**20:.0f} MiB, more than the "
                        f"{MAX_FRAME / 2**20:.0f} MiB the grader accepts")
    return message


def decode(message: bytes):
    """One message -> the value; tensors are fresh leaf tensors (``requires_grad`` as sent)."""
    try:
        head_len, header_len = struct.unpack(">II", message[:8])
        sizes = json.loads(message[8:8 + head_len])["sizes"]
        tree = json.loads(message[8 + head_len:8 + head_len + header_len])
    except (struct.error, ValueError, KeyError, TypeError) as error:
        raise WireError(f"malformed message: {error}") from None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise WireError("malformed message: bad tensor sizes")
    offsets, position = [], 8 + head_len + header_len
    for size in sizes:
        offsets.append((position, position + size))
        position += size
    if position != len(message):
        raise WireError("malformed message: the tensor data does not match its sizes")

    def tensor(node: dict) -> torch.Tensor:
        dtype = _DTYPES.get(node.get("dtype"))
        shape = node.get("shape")
        index = node.get("$t")
        if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape) \
                or not isinstance(index, int) or not 0 <= index < len(offsets):
            raise WireError(f"malformed tensor: {str(node)[:200]}")
        start, end = offsets[index]
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty((), dtype=dtype).element_size()
        if end - start != numel * itemsize:
            raise WireError("malformed tensor: its data does not match its shape")
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(message[start:end]), dtype=torch.uint8).view(dtype).reshape(shape)
        if node.get("grad") is True and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        return t

    def walk(node, depth: int):
        if depth > MAX_DEPTH:
            raise WireError("malformed message: nested too deep")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:
            return [walk(x, depth + 1) for x in node]
        if type(node) is not dict or len(node) == 0:
            raise WireError(f"malformed node: {str(node)[:200]}")
        if "$t" in node:
            return tensor(node)
        if len(node) != 1:
            raise WireError(f"malformed node: {str(node)[:200]}")
        key, body = next(iter(node.items()))
        if key == "$tuple" and type(body) is list:
            return tuple(walk(x, depth + 1) for x in body)
        if key == "$dict" and type(body) is list:
            return {walk(k, depth + 1): walk(v, depth + 1) for k, v in body}
        if key == "$dtype" and body in _DTYPES:
            return _DTYPES[body]
        if key == "$big" and type(body) is str:
            return int(body)
        if key == "$linear" and type(body) is list and len(body) == 2:
            weight, bias = (walk(x, depth + 1) for x in body)
            if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
                raise WireError("malformed Linear")
            layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype)
            with torch.no_grad():
                layer.weight.copy_(weight)
                if bias is not None:
                    layer.bias.copy_(bias)
            return layer
        if key == "$opaque" and type(body) is list and len(body) == 2:
            return Opaque(str(body[0])[:100], str(body[1])[:200])
        raise WireError(f"malformed node: {str(node)[:200]}")

    return walk(tree, 0)


def leaves(value) -> list[torch.Tensor]:
    """The tensors in a nested value (not those inside an ``nn.Linear``), in the order of ``encode``."""
    found: list[torch.Tensor] = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif type(v) in (list, tuple):
            for x in v:
                walk(x)
        elif type(v) is dict:
            for k, x in v.items():
                walk(k)
                walk(x)
    walk(value)
    return found


def replace_leaves(value, tensors: list[torch.Tensor]):
    """``value`` with its tensors (as :func:`leaves` lists them) replaced, in order, by ``tensors``."""
    it = iter(tensors)

    def walk(v):
        if isinstance(v, torch.Tensor):
            return next(it)
        if type(v) is list:
            return [walk(x) for x in v]
        if type(v) is tuple:
            return tuple(walk(x) for x in v)
        if type(v) is dict:
            return {walk(k): walk(x) for k, x in v.items()}
        return v
    return walk(value)


# --- frames on a pipe ------------------------------------------------------------------------------

def send(fd: int, message: bytes) -> None:
    data = struct.pack(">Q", len(message)) + message
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 2**20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> bytes:
    (size,) = struct.unpack(">Q", read_exactly(fd, 8))
    if size > MAX_FRAME + 1024:
        raise WireError(f"a message of {size / 2**20:.0f} MiB, more than the {MAX_FRAME / 2**20:.0f} MiB accepted")
    return read_exactly(fd, size)


def send_json(fd: int, obj: dict) -> None:
    send(fd, b"J" + json.dumps(obj).encode())


def value_frame(header: dict, value) -> bytes:
    """A JSON header and an encoded value, as one frame's message."""
    head = json.dumps(header).encode()
    return b"V" + struct.pack(">I", len(head)) + head + encode(value)


def send_value(fd: int, header: dict, value) -> None:
    send(fd, value_frame(header, value))


def parse(frame: bytes) -> tuple[dict, object]:
    """A received frame -> (header, value or None)."""
    try:
        if frame[:1] == b"J":
            obj = json.loads(frame[1:])
            if type(obj) is not dict:
                raise WireError("malformed frame: the header is not an object")
            return obj, None
        if frame[:1] == b"V":
            (n,) = struct.unpack(">I", frame[1:5])
            obj = json.loads(frame[5:5 + n])
            if type(obj) is not dict:
                raise WireError("malformed frame: the header is not an object")
            return obj, decode(frame[5 + n:])
    except (struct.error, ValueError) as error:
        raise WireError(f"malformed frame: {error}") from None
    raise WireError("malformed frame: unknown kind")
