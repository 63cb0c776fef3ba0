"""Grades one submission: the student's code runs in a sandbox, the tests run here. Trusted side.

    python harness.py SPEC.json SUBMISSION.ipynb WORKDIR RESULT.json [--cell-timeout S]
                      [--total-timeout S] [--unsafe]

``SPEC.json`` is the assignment as the grader wrote it from its source (``classroom.py``): the setup
cells, the solution cells (with the names each defines) and the test cells with their points and
hidden parts. The submission is read as data (JSON), never executed here.

1. The setup cells and the student's own cells (each solution cell of the submission, and any cell the
   student added; the test cells never) are copied into ``WORKDIR`` with the worker, and run in the
   sandbox (:mod:`sandbox`). A cell that runs past ``--cell-timeout`` or ends the process is skipped on
   a restart, and the cells after it still run.
2. Here, in this process, the setup cells and then the test cells run (the source's, with their hidden
   parts) in a namespace where each name the solution cells define is a :class:`RemoteFunction`: a call
   sends the inputs to the sandbox and returns what the student's function returned there (values
   only, through :mod:`wire`), gradients included. The test's assertions, reference values and
   ``torch`` are this process's own, so a submission cannot patch them, read them or skip them, and the
   hidden inputs reach the sandbox only after the student's cells have run.

Writes ``RESULT.json``: per test, points and the message; per student cell, its error and whether it
timed out; what the cells printed before the tests began (``output``, shown to the student: nothing a
hidden test sent); everything printed (``log``, for the teacher); notes. Outputs are capped in bytes.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sandbox  # noqa: E402
import wire  # noqa: E402

MAX_RESTARTS = 6
STUDENT_TEXT = 300  # characters kept of a message the student's own code raised during a test


class SubmissionError(Exception):
    """An exception of the student's code that is not a built-in type, re-raised here by name."""


def defined_names(source: str) -> list[str]:
    """The top-level names a cell of the reference solution defines (functions, classes, variables)."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def to_python(source: str) -> str:
    """IPython syntax (``%time``, ``!ls``) as plain Python, as a kernel would run it."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager  # noqa: PLC0415
    except ImportError:
        return source
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001  (the sandbox reports the SyntaxError)
        return source


def student_cells(spec: dict, submission: dict) -> list[dict]:
    """The cells the sandbox runs, in notebook order: the source's setup cells, and for each solution
    cell the submission's cell of that id followed by the cells the student added after it. Test cells
    (whatever the submission holds under their ids) never run there."""
    kinds = {c["id"]: c["kind"] for c in spec["cells"]}
    attached: dict[str, list[dict]] = {c["id"]: [] for c in spec["cells"]}
    last = spec["cells"][0]["id"]
    for number, cell in enumerate(submission.get("cells", []), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {})
        grade_id = meta.get("nbgrader", {}).get("grade_id") if isinstance(meta, dict) and isinstance(
            meta.get("nbgrader"), dict) else None
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if grade_id in kinds:
            last = grade_id
            if kinds[grade_id] != "solution":
                continue  # setup and test cells: the source's own version (setup) or nothing (tests)
            attached[grade_id].append({"id": grade_id, "source": to_python(source)})
        else:
            attached[last].append({"id": f"your cell {number}", "source": to_python(source)})
    cells = []
    for cell in spec["cells"]:
        if cell["kind"] == "setup":
            cells.append({"id": cell["id"], "source": cell["source"]})
        cells += attached[cell["id"]]
    return cells


HIDDEN_REGION = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.S | re.M)


def _normal(source: str) -> list[str]:
    return [line.rstrip() for line in source.splitlines() if line.strip()]


def edits(spec: dict, submission: dict) -> list[str]:
    """What the submission changed of the locked cells handed out (for the teacher: the grader ignores
    these edits, it runs the source's own cells): edited or removed test and setup cells, points
    changed, test cells of the student's own."""
    source = {c["id"]: c for c in spec["cells"] if c["kind"] != "solution"}
    seen, found = set(), []
    for cell in submission.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
        meta = meta if isinstance(meta, dict) else {}
        grade_id = meta.get("grade_id")
        text = cell.get("source", "")
        text = "".join(text) if isinstance(text, list) else str(text)
        if grade_id in source:
            seen.add(grade_id)
            original = source[grade_id]
            if _normal(text) not in (_normal(HIDDEN_REGION.sub("", original["source"])), _normal(original["source"])):
                found.append(f"edited {original['kind']} cell {grade_id}")
            if original["kind"] == "test" and meta.get("points") != original["points"]:
                found.append(f"points of {grade_id} changed to {meta.get('points')!r}")
        elif meta.get("grade"):
            found.append(f"a test cell of its own ({str(grade_id)[:40]!r})")
    found += [f"removed {source[i]['kind']} cell {i}" for i in source if i not in seen]
    return found


class Session:
    """The sandboxed worker of one submission, restarted (skipping the cell at fault) when needed."""

    def __init__(self, workdir: Path, cells: list[dict], limits: sandbox.Limits, unsafe: bool):
        self.workdir, self.cells, self.limits, self.unsafe = workdir, cells, limits, unsafe
        self.deadline = time.monotonic() + limits.total_seconds
        self.skip: dict[str, str] = {}  # cell id -> why it is skipped
        self.cell_errors: dict[str, dict] = {}
        self.outputs: list[str] = []  # everything each worker printed (for the teacher)
        self.cell_output = ""  # what the cells printed before any test input arrived (for the student)
        self.names: dict[str, str] = {}
        self.worker: sandbox.Worker | None = None
        self.restarts = 0
        self.calls = 0
        for name in ("worker.py", "wire.py"):
            shutil.copyfile(HERE / name, workdir / name)
        (workdir / "cells.json").write_text(json.dumps(cells))

    def start(self) -> None:
        """Run the cells in a fresh worker; skip (and note) a cell that times out or kills it."""
        while True:
            if self.restarts > MAX_RESTARTS:
                raise sandbox.WorkerDied(f"the submission's process had to be restarted {MAX_RESTARTS} times")
            if time.monotonic() >= self.deadline:
                raise sandbox.Timeout()
            self.close()
            self.worker = sandbox.Worker(self.workdir, self.limits, self.unsafe, set(self.skip), self.deadline)
            self.restarts += 1
            current = None
            try:
                while True:
                    until = time.monotonic() + (self.limits.cell_seconds if current else 120.0)  # 120: the start
                    header, _ = self.worker.receive(until)
                    event = header.get("event")
                    if event == "cell":
                        current = str(header.get("id"))
                    elif event == "cell-done":
                        if header.get("error") and current:
                            self.cell_errors[current] = header["error"]
                        current = None
                    elif event == "ready":
                        time.sleep(0.05)  # let the output thread read what the last cell printed
                        if not self.cell_output:
                            self.cell_output = self.worker.output.text()
                        names = header.get("names")
                        self.names = {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}
                        return
                    else:
                        raise sandbox.WorkerDied("the submission broke the grader's protocol")
            except sandbox.Timeout:
                if current is None or time.monotonic() >= self.deadline:
                    raise
                self.skip[current] = f"interrupted after {self.limits.cell_seconds:g} s (an endless loop?)"
            except sandbox.WorkerDied as died:
                if current is None:
                    raise
                self.skip[current] = f"{died} while running it"

    def call(self, name: str, args: tuple, kwargs: dict, grad: bool, count: bool = False):
        """Run the student's ``name(*args, **kwargs)`` in the running sandbox: (header, returned value)."""
        self.calls += 1
        header = {"op": "call", "name": name, "grad": grad, "count": count, "id": self.calls}
        return self._exchange(header, (args, kwargs), f"the call to {name}()")

    def backward(self, call_id: int, grads: list):
        return self._exchange({"op": "backward", "id": call_id}, grads, "the backward pass")

    def _exchange(self, header: dict, value, what: str):
        if self.worker is None or not self.worker.alive:
            raise SubmissionError(f"the submission's process was restarted before {what}")
        try:
            self.worker.send(wire.value_frame(header, value))
            reply, result = self.worker.receive(time.monotonic() + self.limits.cell_seconds)
        except sandbox.Timeout:
            self.worker.kill()
            raise TimeoutError(f"{what} ran past the time limit of {self.limits.cell_seconds:g} s "
                               "(an endless loop?)") from None
        except sandbox.WorkerDied as died:
            self.worker.kill()
            raise SubmissionError(f"{died} during {what}") from None
        if reply.get("id") != header["id"]:
            self.worker.kill()
            raise SubmissionError(f"the submission broke the grader's protocol during {what}")
        if not reply.get("ok"):
            raise remote_exception(reply.get("error"))
        return reply, result

    def close(self) -> None:
        if self.worker is not None:
            if self.worker.alive:
                self.worker.kill()
            self.outputs.append(self.worker.output.text())
            self.worker = None


def remote_exception(error) -> BaseException:
    """The student's exception as one of this process's built-in types (or SubmissionError)."""
    import builtins  # noqa: PLC0415

    if not isinstance(error, dict):
        return SubmissionError("the submission raised an exception the grader could not read")
    kind = getattr(builtins, str(error.get("builtin")), None)
    name, message = str(error.get("type"))[:100], str(error.get("message"))[:wire.MAX_TEXT]
    text = message if name == error.get("builtin") else f"{name}: {message}"
    if isinstance(kind, type) and issubclass(kind, Exception) and kind is not Exception:
        exc = kind(text)
    else:
        exc = SubmissionError(f"{name}: {message}")
    exc.from_submission = True  # its text is the student's: shown shortened (it may echo a test's inputs)
    return exc


class _RemoteCall:
    """Autograd across the sandbox: the forward pass runs there; backward asks it for the gradients."""

    @staticmethod
    def build():
        import torch  # noqa: PLC0415

        class RemoteCall(torch.autograd.Function):
            @staticmethod
            def forward(ctx, proxy, args, kwargs, holder, *inputs):
                reply, result = proxy.session.call(proxy.name, args, kwargs, grad=True)
                ctx.session, ctx.call_id, ctx.n_inputs = proxy.session, reply["id"], len(inputs)
                outputs = wire.leaves(result)
                holder["result"] = result
                holder["differentiable"] = [o.requires_grad for o in outputs]
                returned = tuple(o.detach() for o in outputs)
                ctx.mark_non_differentiable(*[r for r, o in zip(returned, outputs) if not o.requires_grad])
                return returned

            @staticmethod
            def backward(ctx, *grads):
                _, input_grads = ctx.session.backward(ctx.call_id, list(grads))
                if not isinstance(input_grads, list) or len(input_grads) != ctx.n_inputs:
                    raise SubmissionError("the submission sent back gradients the grader could not read")
                return (None, None, None, None, *input_grads)

        return RemoteCall


class RemoteFunction:
    """Stands for one of the student's functions: calling it calls the function in the sandbox."""

    _autograd = None

    def __init__(self, session: Session, name: str):
        self.session, self.name = session, name
        self.__name__ = self.__qualname__ = name

    def __repr__(self) -> str:
        return f"<the submission's {self.name}>"

    def _ready(self) -> None:
        """A running worker in which the student's cells defined this name."""
        if self.session.worker is None or not self.session.worker.alive:
            try:
                self.session.start()
            except sandbox.Timeout:
                raise TimeoutError("the submission ran past its total time limit") from None
            except sandbox.WorkerDied as died:
                raise SubmissionError(str(died)) from None
        if self.name not in self.session.names:
            raise NameError(f"name {self.name!r} is not defined (did its cell run without an error?)")

    def __call__(self, *args, **kwargs):
        import torch  # noqa: PLC0415

        self._ready()
        inputs = wire.leaves((args, kwargs))
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
            if RemoteFunction._autograd is None:
                RemoteFunction._autograd = _RemoteCall.build()
            holder: dict = {}
            outputs = RemoteFunction._autograd.apply(self, args, kwargs, holder, *inputs)
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            return wire.replace_leaves(holder["result"], list(outputs))
        _, result = self.session.call(self.name, args, kwargs, grad=False)
        return result

    def count_torch_calls(self, *args, **kwargs) -> int:
        """How many torch functions one call makes, counted inside the sandbox (see the guide)."""
        self._ready()
        reply, _ = self.session.call(self.name, args, kwargs, grad=False, count=True)
        calls = reply.get("calls")
        if type(calls) is not int:
            raise SubmissionError("the submission sent back no call count")
        return calls


def grade(spec: dict, submission_path: Path, workdir: Path, limits: sandbox.Limits, unsafe: bool) -> dict:
    tests = [c for c in spec["cells"] if c["kind"] == "test"]
    result = {"status": "graded", "tests": [], "cells": {}, "notes": [], "output": ""}

    def not_graded(why: str) -> dict:
        result["tests"] = [{"test": t["id"], "points": 0.0, "max_points": t["points"],
                            "message": f"not graded: {why}"} for t in tests]
        return result

    try:
        submission = json.loads(submission_path.read_text(errors="replace"))
        if not isinstance(submission, dict) or not isinstance(submission.get("cells"), list):
            raise ValueError("no list of cells")
    except (ValueError, OSError) as error:
        result["status"] = "failed"
        result["notes"].append(f"the submission is not a notebook ({str(error)[:200]})")
        return not_graded("the submission is not a notebook")

    changed = edits(spec, submission)
    if changed:
        result["notes"].append("locked cells changed (the grader ran the handed-out ones): " + "; ".join(changed[:8]))
    session = Session(workdir, student_cells(spec, submission), limits, unsafe)
    import torch  # noqa: PLC0415  (after the sandbox has started: the two imports overlap)

    try:
        session.start()
    except (sandbox.Timeout, sandbox.WorkerDied) as error:
        session.close()
        result["status"] = "timed out" if isinstance(error, sandbox.Timeout) else "failed"
        why = "it ran past the total time limit" if isinstance(error, sandbox.Timeout) else str(error)
        result["notes"].append(f"the submission could not be run: {why}")
        result["output"] = result["log"] = "".join(session.outputs)
        return not_graded(why)

    namespace: dict = {"__name__": "__main__"}
    for cell in spec["cells"]:
        if cell["kind"] == "setup":
            exec(compile(cell["source"], f"<setup {cell['id']}>", "exec"), namespace)  # noqa: S102
        elif cell["kind"] == "solution":
            for name in cell["names"]:
                namespace[name] = RemoteFunction(session, name)
        elif time.monotonic() >= session.deadline:
            result["status"] = "timed out"
            result["tests"].append({"test": cell["id"], "points": 0.0, "max_points": cell["points"],
                                    "message": "not graded: the submission ran past its total time limit"})
        else:
            try:
                exec(compile(cell["source"], f"<test {cell['id']}>", "exec"), namespace)  # noqa: S102
                points, message = cell["points"], "passed"
            except Exception as error:  # noqa: BLE001
                points, message = 0.0, f"{type(error).__name__}: {error}".strip()
                if getattr(error, "from_submission", False) and len(message) > STUDENT_TEXT:
                    message = message[:STUDENT_TEXT] + " [...]"
            result["tests"].append({"test": cell["id"], "points": float(points), "max_points": cell["points"],
                                    "message": message[:wire.MAX_TEXT]})
    session.close()
    for cell_id, why in session.skip.items():
        result["notes"].append(f"{why}: {cell_id}; the cells after it still ran")
    result["cells"] = {k: {"error": f"{v.get('type')}: {v.get('message')}", "traceback": v.get("traceback", "")}
                       for k, v in session.cell_errors.items()}
    result["output"] = session.cell_output
    result["log"] = "\n".join(o for o in session.outputs if o)  # with what it printed during the tests
    result["restarts"] = session.restarts - 1
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="grade one submission (see the module docstring)")
    parser.add_argument("spec", type=Path)
    parser.add_argument("submission", type=Path)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--cell-timeout", type=float, default=60.0)
    parser.add_argument("--total-timeout", type=float, default=600.0)
    parser.add_argument("--unsafe", action="store_true")
    args = parser.parse_args(argv)
    limits = sandbox.Limits(cell_seconds=args.cell_timeout, total_seconds=args.total_timeout)
    start = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = grade(json.loads(args.spec.read_text()), args.submission, args.workdir, limits, args.unsafe)
    except Exception:  # noqa: BLE001  (the grader's own failure: say so, grade nothing)
        result = {"status": "failed", "tests": [], "cells": {}, "output": "",
                  "notes": [f"grader error: {traceback.format_exc()[-1500:]}"]}
    result["seconds"] = time.perf_counter() - start
    result["harness_max_rss_mib"] = sandbox.peak_memory_mib()
    tmp = args.result.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(args.result)
    return 0


def serve(requests=None, replies=None) -> int:
    """A fork server for the grader (``python harness.py --serve``): torch and this module are imported
    once, then each request line ``{"argv": [...], "log": path}`` is answered with ``{"pid": N}`` of a
    fresh fork that grades that submission (:func:`run_forked`); it ends when its input ends.

    One process, no threads (a fork copies only the forking thread: no lock can be left held), and
    its children reaped by the kernel (SIGCHLD ignored), so the grader watches each child by its pid.
    A forked harness is the grader's own code; the student's code runs in the sandbox each one starts,
    exactly as in a harness started afresh."""
    import signal  # noqa: PLC0415

    import torch  # noqa: F401, PLC0415  (the import every forked harness would otherwise repeat)

    requests, replies = requests or sys.stdin, replies or sys.stdout
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in requests:
        request = json.loads(line)
        replies.flush()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the harness waits for its sandbox
            run_forked(request["argv"], request["log"])  # never returns
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
    return 0


def run_forked(argv: list[str], log: str) -> None:
    """:func:`main` in a process forked by :func:`serve`: a session of its own (the grader kills the
    whole group at its time limit; the sandbox dies with the harness), its output to ``log``."""
    code = 1
    try:
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdin = open(os.devnull)  # noqa: SIM115  (the server's requests are not this harness's)
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"  # several submissions at once
        import torch  # noqa: PLC0415  (imported by the server: no cost)

        torch.set_num_threads(1)
        code = main(argv)
    except BaseException:  # noqa: BLE001  (the log says why; the grader sees no result file)
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110
                pass
        os._exit(code)


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main())
