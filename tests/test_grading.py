"""The grading sandbox and harness (tools/grading): what the instructor guide promises of them.

The whole red-team suite runs in ``test_classroom.py`` (``classroom.py check``); these tests pin the
pieces: the wire format carries values and nothing else, the sandbox hides the grader's files and the
network and ends every process it started, the harness runs the student's cells but never the test
cells of a submission, the feedback page never shows a hidden test, and without a sandbox the grader
refuses to grade unless told ``--unsafe``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "grading"))
import classroom  # noqa: E402
import harness  # noqa: E402
import sandbox  # noqa: E402
import wire  # noqa: E402



def test_the_sandbox_works_here():
    """`make test` installs bubblewrap: a sandbox that cannot start is a failure, not a skip."""
    assert sandbox.sandbox_problem() is None


# --- the wire format ------------------------------------------------------------------------------

def test_wire_round_trip_keeps_values_dtypes_shapes_and_grad_flags():
    value = {"a": (torch.randn(2, 3), torch.tensor([True, False]), torch.zeros(0, 4, dtype=torch.int64)),
             "b": [1, 2.5, float("nan"), None, "text", torch.float16], "c": torch.tensor(1.5).requires_grad_()}
    back = wire.decode(wire.encode(value))
    torch.testing.assert_close(back["a"][0], value["a"][0])
    assert back["a"][1].dtype == torch.bool and back["a"][1].tolist() == [True, False]
    assert back["a"][2].shape == (0, 4) and back["a"][2].dtype == torch.int64
    assert back["b"][:2] == [1, 2.5] and math.isnan(back["b"][2]) and back["b"][3:] == [None, "text", torch.float16]
    assert back["c"].requires_grad and back["c"].is_leaf
    bf16 = torch.randn(3, dtype=torch.bfloat16)
    assert torch.equal(wire.decode(wire.encode(bf16)), bf16)


def test_wire_carries_a_linear_layer_as_its_weights():
    layer = torch.nn.Linear(4, 3)
    back = wire.decode(wire.encode(layer))
    assert isinstance(back, torch.nn.Linear)
    torch.testing.assert_close(back(torch.ones(2, 4)), layer(torch.ones(2, 4)))


def test_wire_sends_other_objects_as_opaque_names_only():
    class Sneaky:
        def __reduce__(self):  # what pickle would run on the other side
            return (os.system, ("echo hacked",))

        def __eq__(self, other):  # an answer that equals everything
            return True

    back = wire.decode(wire.encode([Sneaky(), torch.Tensor.add]))
    assert all(isinstance(x, wire.Opaque) for x in back)
    assert back[0].type_name == "Sneaky" and back[0] != 1  # the stand-in has no custom equality


def test_a_tensor_subclass_comes_back_as_a_plain_tensor():
    class AlwaysClose(torch.Tensor):
        def __eq__(self, other):
            return torch.ones((), dtype=torch.bool)

    back = wire.decode(wire.encode(torch.zeros(3).as_subclass(AlwaysClose)))
    assert type(back) is torch.Tensor


@pytest.mark.parametrize("tamper", ["sizes", "dtype", "index", "shape", "node", "header"])
def test_a_malformed_message_is_a_wire_error(tamper):
    message = bytearray(wire.encode([torch.ones(2, 2)]))
    head_len, header_len = int.from_bytes(message[:4], "big"), int.from_bytes(message[4:8], "big")
    head = json.loads(message[8:8 + head_len])
    tree = json.loads(message[8 + head_len:8 + head_len + header_len])
    blob = bytes(message[8 + head_len + header_len:])
    if tamper == "sizes":
        head["sizes"] = [3]
    elif tamper == "dtype":
        tree[0]["dtype"] = "object"
    elif tamper == "index":
        tree[0]["$t"] = 5
    elif tamper == "shape":
        tree[0]["shape"] = [3, 3]
    elif tamper == "node":
        tree = [{"$import": "os.system"}]
    if tamper == "header":
        rebuilt = b"\x00\x00\x00\x05\x00\x00\x00\x02{{{{{[]"
    else:
        h, t = json.dumps(head).encode(), json.dumps(tree).encode()
        rebuilt = len(h).to_bytes(4, "big") + len(t).to_bytes(4, "big") + h + t + blob
    with pytest.raises(wire.WireError):
        wire.decode(rebuilt)


def test_the_grader_never_unpickles():
    for name in ("wire.py", "worker.py", "harness.py", "sandbox.py"):
        text = (ROOT / "tools" / "grading" / name).read_text()
        assert "pickle" not in text.replace("no pickle", "").replace("pickle would", "") and "torch.load" not in text, name


def test_an_answer_larger_than_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(wire, "MAX_FRAME", 1000)
    with pytest.raises(wire.WireError, match="more than"):
        wire.encode(torch.zeros(1000))


# --- what runs where ------------------------------------------------------------------------------

SPEC = {"name": "demo", "cells": [
    {"id": "setup", "kind": "setup", "source": "import math"},
    {"id": "answer", "kind": "solution", "source": "def f(x):\n    return x", "names": ["f"]},
    {"id": "test-f", "kind": "test", "points": 2.0, "source": "assert f(1) == 1\n### BEGIN HIDDEN TESTS\n"
     "assert f(2) == 2\n### END HIDDEN TESTS\n", "visible": "assert f(1) == 1\n# (hidden tests)"},
]}


def cell(source, grade_id=None, **meta):
    nbgrader = {"grade_id": grade_id, **meta} if grade_id else None
    return {"cell_type": "code", "source": source, "metadata": {"nbgrader": nbgrader} if nbgrader else {}}


def test_the_sandbox_runs_the_sources_setup_the_students_cells_and_never_a_test_cell():
    submission = {"cells": [
        cell("import os  # the student's copy of the setup is ignored", "setup"),
        cell("def f(x):\n    return 2 * x", "answer", solution=True),
        cell("helper = 1"),
        cell("f = lambda x: x  # an edited test cell: never runs", "test-f", grade=True, points=100),
        {"cell_type": "markdown", "source": "notes", "metadata": {}},
        cell("%time f(3)"),
    ]}
    cells = harness.student_cells(SPEC, submission)
    assert [c["id"] for c in cells] == ["setup", "answer", "your cell 3", "your cell 6"]
    assert cells[0]["source"] == "import math" and "2 * x" in cells[1]["source"]
    assert "get_ipython().run_line_magic('time', 'f(3)')" in cells[3]["source"]  # IPython syntax as Python


def test_edits_of_locked_cells_are_reported_for_the_teacher():
    handed_out = {"cells": [cell("import math", "setup"), cell("def f(x):\n    return 2 * x", "answer", solution=True),
                            cell("assert f(1) == 1\n", "test-f", grade=True, points=2.0)]}
    assert harness.edits(SPEC, handed_out) == []
    tampered = {"cells": [cell("import math", "setup"), cell("pass", "test-f", grade=True, points=100),
                          cell("pass", "bonus", grade=True, points=50)]}
    assert harness.edits(SPEC, tampered) == ["edited test cell test-f", "points of test-f changed to 100",
                                             "a test cell of its own ('bonus')"]
    assert harness.edits(SPEC, {"cells": []}) == ["removed setup cell setup", "removed test cell test-f"]


def test_defined_names_of_a_solution_cell():
    source = "import torch\n\ndef a(x):\n    pass\n\nclass B:\n    pass\n\nC = 3\n"
    assert harness.defined_names(source) == ["a", "B", "C"]


def test_the_students_exceptions_come_back_as_builtin_types_or_submission_errors():
    assert type(harness.remote_exception({"type": "TypeError", "builtin": "TypeError", "message": "m"})) is TypeError
    mine = harness.remote_exception({"type": "MaskError", "builtin": "ValueError", "message": "bad"})
    assert type(mine) is ValueError and str(mine) == "MaskError: bad"
    for name in ("SystemExit", "KeyboardInterrupt", "NoSuchType"):
        assert isinstance(harness.remote_exception({"type": name, "builtin": "Exception", "message": ""}),
                          harness.SubmissionError)


def test_the_feedback_page_never_shows_hidden_tests():
    spec = classroom.assignment_spec("a1_masked_attention")
    result = classroom.StudentResult("ana", ROOT, "graded", [
        classroom.TestResult(c["id"], 0.0, c["points"], "AssertionError: <b>hint</b>")
        for c in spec["cells"] if c["kind"] == "test"], output="printed <script>")
    page = classroom.feedback_page("a1_masked_attention", spec, result)
    hidden = [line.strip() for c in spec["cells"] if c["kind"] == "test"
              for part in c["source"].split("### BEGIN HIDDEN TESTS")[1:]
              for line in part.split("### END HIDDEN TESTS")[0].splitlines() if len(line.strip()) > 15]
    shown = "\n".join(c["visible"] for c in spec["cells"] if c["kind"] == "test")
    assert hidden and not [line for line in hidden if line in page and line not in shown]
    assert "check_close(masked_softmax(scores), torch.softmax(scores, -1)," in page  # a visible test
    assert "&lt;b&gt;hint&lt;/b&gt;" in page and "<script>" not in page  # the student's text is escaped


# --- the sandbox ----------------------------------------------------------------------------------

def run_cells(tmp_path, sources: list[str], limits: sandbox.Limits | None = None) -> harness.Session:
    session = harness.Session(tmp_path, [{"id": f"c{i}", "source": s} for i, s in enumerate(sources)],
                              limits or sandbox.Limits(cell_seconds=20, total_seconds=60), unsafe=False)
    session.start()
    return session


def test_the_sandbox_hides_the_grader_the_network_and_other_processes(tmp_path):
    probe = f"""
import os, socket
print('repo', os.path.exists({str(ROOT / 'assignments')!r}), os.path.exists({str(ROOT / 'tools')!r}))
print('parent', os.path.exists({str(tmp_path.parent)!r} + '/x'), sorted(os.listdir('/sandbox')))
print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:3])
try:
    socket.create_connection(('127.0.0.1', 22), timeout=2)
except OSError as error:
    print('net', type(error).__name__)
for path in ('/usr/evil', {str(ROOT / 'evil')!r}):
    try:
        open(path, 'w')
    except OSError as error:
        print('write', type(error).__name__)
"""
    session = run_cells(tmp_path, [probe])
    session.close()
    out = session.outputs[0]
    assert "repo False False" in out
    assert "['cells.json', 'skip.json', 'wire.py', 'worker.py']" in out  # its folder holds only its own files
    assert "pids [1, 2" in out  # a PID namespace of its own
    assert "net ConnectionRefusedError" in out or "net OSError" in out
    assert out.count("write ") >= 1 and not (ROOT / "evil").exists()  # /usr is read-only; the repository
    # is not there (a repository under /tmp lands in the sandbox's private /tmp, not on the host)


def test_nothing_a_submission_starts_outlives_it(tmp_path):
    daemon = ("import os, subprocess\n"
              "if os.fork() == 0:\n    os.setsid()\n    os.execv('/bin/sh', ['sh', '-c', 'exec sleep 331'])\n"
              "subprocess.Popen(['sleep', '337'], start_new_session=True)\n")
    session = run_cells(tmp_path, [daemon])
    time.sleep(0.5)
    session.close()
    time.sleep(0.5)
    assert classroom._processes_with(("sleep 331", "sleep 337")) == []


def test_limits_stop_a_cell_and_the_cells_after_it_still_run(tmp_path):
    # 6 s: the endless loop burns it all, and the allocating cell must import torch within it on a busy
    # machine (about 1 s on a quiet one): a limit, not a measured time
    limits = sandbox.Limits(cell_seconds=6, total_seconds=60, memory_bytes=3 * 2**30)
    session = run_cells(tmp_path, ["while True:\n    pass", "import os\nos._exit(3)",
                                   "import torch\nbig = torch.ones(2**30)", "print('x' * 10**7)",
                                   "def f(x):\n    return x + 1"], limits)
    assert session.skip["c0"].startswith("interrupted after 6 s") and "exited with code 3" in session.skip["c1"]
    assert "can't allocate memory" in session.cell_errors["c2"]["message"]
    reply, value = session.call("f", (torch.ones(2),), {}, grad=False)
    assert value.tolist() == [2.0, 2.0]
    session.close()
    assert "more bytes of output dropped" in session.outputs[-1] and len(session.outputs[-1]) < 2 * limits.output_bytes


@pytest.mark.skipif(sandbox.process_limit() == "none", reason="no process limit for root without a pids cgroup")
def test_a_fork_bomb_stops_at_the_process_limit(tmp_path):
    limits = sandbox.Limits(cell_seconds=20, total_seconds=60, processes=32)
    bomb = ("import os, time\nn = 0\ntry:\n    for _ in range(300):\n        if os.fork() == 0:\n"
            "            time.sleep(60)\n            os._exit(0)\n        n += 1\n"
            "except OSError:\n    print('forks stopped at', n)\n")
    session = run_cells(tmp_path, [bomb], limits)
    session.close()
    stopped = int(session.outputs[0].split("forks stopped at")[1].split()[0])
    assert 0 < stopped < 32


def test_a_remote_function_carries_gradients_and_raises_the_students_errors(tmp_path):
    session = run_cells(tmp_path, ["import torch\ndef f(a, b):\n    return (a * b).sum(), 'note'\n"
                                   "def g(x):\n    raise TypeError('a bool mask, please')\n"
                                   "def h(x):\n    return x, x.detach(), float(x.sum())"])
    f, g = harness.RemoteFunction(session, "f"), harness.RemoteFunction(session, "g")
    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    total, note = f(a, b)
    total.backward()
    torch.testing.assert_close(a.grad, b)
    assert note == "note"
    x = torch.randn(3, requires_grad=True)
    same, detached, number = harness.RemoteFunction(session, "h")(x)
    assert same.requires_grad and not detached.requires_grad and isinstance(number, float)
    (3 * same.sum()).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))
    with pytest.raises(TypeError, match="a bool mask"):
        g(1)
    with pytest.raises(NameError, match="'k' is not defined"):
        harness.RemoteFunction(session, "k")(1)
    session.close()


def test_without_a_sandbox_the_grader_refuses_unless_told_unsafe(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    monkeypatch.setattr(sandbox, "_PROBE", {})
    (tmp_path / "ana.ipynb").write_text("{}")
    with pytest.raises(SystemExit, match="refusing to grade.*bubblewrap.*--unsafe"):
        classroom.grade("a1_masked_attention", tmp_path, tmp_path / "out")
