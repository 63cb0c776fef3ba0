"""Two processes at once on the same experiment (the book build beside nbval, a notebook beside
`results run`, two students on one shared home): neither crashes, one trains, the other waits and
reuses the finished checkpoint, and every file they share is written whole.

Both processes run the script below. Whichever takes the checkpoint's lock first trains; its model's
first step waits until the other process has said that it waits for the lock, so the two really
overlap, whatever the machine's speed (no sleeps to tune).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT

SCRIPT = textwrap.dedent("""\
    import json, sys, time
    from pathlib import Path
    import torch
    from torch import nn
    from attn_tutorial import results, runs
    from attn_tutorial.training import fit, seed_everything

    root, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)

    class WaitsForTheOther(nn.Module):
        \"\"\"A linear classifier whose first training step waits until the other process is
        blocked on the lock (it says so on its output), so that both run at once.\"\"\"
        def __init__(self):
            super().__init__()
            self.linear, self.waited = nn.Linear(4, 2), False
        def forward(self, features):
            if self.training and not self.waited:
                deadline = time.monotonic() + 120
                while "waiting for it to finish" not in (root / f"out-{other}.txt").read_text():
                    if time.monotonic() > deadline:
                        raise TimeoutError("the other process never waited for the lock")
                    time.sleep(0.01)
                self.waited = True
            return self.linear(features)

    seed_everything(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 4, generator=g)
    batches = [{"features": x[i:i + 32], "labels": (x[i:i + 32].sum(1) > 0).long()} for i in range(0, 256, 32)]
    model = WaitsForTheOther()
    (root / f"ready-{me}").touch()  # start together
    while not (root / f"ready-{other}").exists():
        time.sleep(0.01)
    history = fit(model, batches[:6], batches[6:], epochs=3, lr=0.1, device=torch.device("cpu"),
                  checkpoint=root / "ckpt" / "run.pt", progress=False)

    (root / f"fitted-{me}").touch()  # and write together
    while not (root / f"fitted-{other}").exists():
        time.sleep(0.01)
    # the file that collided in CI: resume states written by both processes, many times over
    for step in range(40):
        runs.save_resume_state(root / "shared" / "run.pt", "key", step=step, writer=me)
    # two seeds recorded into one record at once: both are kept
    run = {"experiment": "zz_two", "description": "two writers", "profile": "smoke", "seed": int(me == "b"),
           "device": "cpu", "metrics": {"accuracy": 0.5}}
    results.write_record("zz_two", [run], "test", directory=root / "results")
    weights = [round(v, 6) for v in torch.cat([p.flatten() for p in model.parameters()]).tolist()]
    print("RESULT " + json.dumps({"reused": history["reused_checkpoint"], "weights": weights,
                                  "epochs": [row["epoch"] for row in history["epochs"]]}))
""")


def test_two_processes_training_one_checkpoint_train_it_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    outputs = {me: tmp_path / f"out-{me}.txt" for me in "ab"}
    processes = {}
    for me, other in (("a", "b"), ("b", "a")):
        outputs[me].write_text("")
        processes[me] = subprocess.Popen([sys.executable, str(script), str(tmp_path), me, other], cwd=ROOT,
                                         stdout=open(outputs[me], "w"), stderr=subprocess.STDOUT)
    for me, process in processes.items():
        assert process.wait(timeout=300) == 0, outputs[me].read_text()[-3000:]
    texts = {me: path.read_text() for me, path in outputs.items()}
    found = {me: json.loads(text.split("RESULT ", 1)[1]) for me, text in texts.items()}
    trainer, waiter = sorted("ab", key=lambda me: found[me]["reused"])
    assert not found[trainer]["reused"] and found[waiter]["reused"], found  # one training, one reuse
    assert "waiting for it to finish" in texts[waiter] and "Loaded the finished checkpoint" in texts[waiter]
    assert "waiting" not in texts[trainer]
    assert found[trainer]["weights"] == found[waiter]["weights"]  # the same model
    assert found[trainer]["epochs"] == found[waiter]["epochs"] == [1, 2, 3]
    record = json.loads((tmp_path / "results" / "zz_two" / "smoke.json").read_text())
    assert record["seeds"] == [0, 1]
    for folder in ("ckpt", "shared", "results/zz_two"):
        assert not list((tmp_path / folder).glob("*.tmp")), folder  # no temporary file left behind
        assert not list((tmp_path / folder).glob(".*.tmp")), folder
