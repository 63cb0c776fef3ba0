"""Runs one student's code inside the sandbox and answers the harness's calls. Untrusted side.

    python -I worker.py CELLS.json REQUEST_FD RESPONSE_FD [SKIP.json]

1. Executes the cells of ``CELLS.json`` (the assignment's setup cells and the student's own cells, in
   notebook order), reporting each start and end to the harness, which enforces the time limit per
   cell from outside (it kills this process and starts a new one that skips the cell; ``SKIP.json``
   lists the cells to skip).
2. Says which names the cells defined, then answers calls: ``call`` runs one of the student's
   functions on the inputs the harness sends and sends back what it returned or raised; ``backward``
   sends back the gradients of a previous call's inputs. The harness never sends its tests or its
   expected values, only inputs, and only after every cell has run.

Everything this process sends is treated by the harness as the student's answer, never as a verdict:
a submission that tampers with this file's code can only change its own answers.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import traceback

import torch
from torch.overrides import TorchFunctionMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python -I leaves the script's folder out
import wire  # noqa: E402

MAX_TRACEBACK = 3000


class _CountCalls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _error(exc: BaseException) -> dict:
    """An exception as data: its type, the nearest built-in exception type above it, its message."""
    builtin = next((c.__name__ for c in type(exc).__mro__
                    if getattr(builtins, c.__name__, None) is c and issubclass(c, Exception)), "Exception")
    try:
        message = str(exc)[:wire.MAX_TEXT]
    except Exception:  # noqa: BLE001  (a hostile __str__)
        message = "?"
    return {"type": type(exc).__name__[:100], "builtin": builtin, "message": message}


def run_cells(cells: list[dict], skip: set[str], namespace: dict, out: int) -> None:
    for cell in cells:
        if cell["id"] in skip:
            continue
        wire.send_json(out, {"event": "cell", "id": cell["id"]})
        error = None
        try:
            exec(compile(cell["source"], f"<cell {cell['id']}>", "exec"), namespace)  # noqa: S102
        except BaseException as exc:  # noqa: BLE001  (SystemExit and KeyboardInterrupt too: the cell failed)
            error = dict(_error(exc), traceback=traceback.format_exc()[-MAX_TRACEBACK:])
        sys.stdout.flush()
        wire.send_json(out, {"event": "cell-done", "id": cell["id"], "error": error})


def serve(namespace: dict, inp: int, out: int) -> None:
    graphs: dict[int, tuple[list, list]] = {}
    while True:
        header, value = wire.parse(wire.receive(inp))
        op, call_id = header.get("op"), header.get("id")
        try:
            if op == "exit":
                return
            if op == "call":
                function = namespace.get(header["name"])
                if function is None:
                    raise NameError(f"name {header['name']!r} is not defined")
                args, kwargs = value
                grad = bool(header.get("grad"))
                counter = _CountCalls() if header.get("count") else None
                with torch.set_grad_enabled(grad):
                    if counter is not None:
                        with counter:
                            result = function(*args, **kwargs)
                    else:
                        result = function(*args, **kwargs)
                if grad:
                    graphs.clear()  # one call's graph at a time is enough for the tests' backward()
                    graphs[call_id] = ([t for t in wire.leaves((args, kwargs))],
                                       [t for t in wire.leaves(result)])
                reply = {"ok": True, "id": call_id}
                if counter is not None:
                    reply["calls"] = counter.calls
                wire.send_value(out, reply, result)
            elif op == "backward":
                inputs, outputs = graphs.pop(call_id)
                pairs = [(o, g if g is not None else torch.zeros_like(o))
                         for o, g in zip(outputs, value) if o.requires_grad]
                wanted = [t for t in inputs if t.requires_grad]
                grads = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                            allow_unused=True) if pairs and wanted else [None] * len(wanted)
                by_input = iter(grads)
                wire.send_value(out, {"ok": True, "id": call_id},
                                [next(by_input) if t.requires_grad else None for t in inputs])
            else:
                raise ValueError(f"unknown request {op!r}")
        except BaseException as exc:  # noqa: BLE001  (the student's exception goes back as data)
            try:
                wire.send_json(out, {"ok": False, "id": call_id, "error": _error(exc)})
            except wire.WireError as error:
                wire.send_json(out, {"ok": False, "id": call_id, "error": _error(error)})


def main() -> None:
    cells_file, inp, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    skip = set(json.loads(open(sys.argv[4]).read())) if len(sys.argv) > 4 else set()
    with open(cells_file) as fh:
        cells = json.load(fh)
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    run_cells(cells, skip, namespace, out)
    names = {name: type(value).__name__ for name, value in namespace.items()
             if not name.startswith("__") and callable(value)}
    wire.send_json(out, {"event": "ready", "names": names})
    serve(namespace, inp, out)


if __name__ == "__main__":
    main()
