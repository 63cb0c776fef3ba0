# Hand-written course infrastructure (not generated from a notebook).
"""What keeps a long training run trustworthy: dry runs, checkpoints keyed by their
configuration, resumable training state and a heartbeat for unattended builds.

* **Dry run** (:func:`dry_run`): every registered experiment at a profile's *sizes* (model
  widths, sequence lengths, batch size, vocabulary) but only two optimisation steps and one
  evaluation batch per loop, on a small slice of the data, optionally under a GPU's
  mixed-precision settings on the CPU. It proves the ``full`` profile's code paths before a GPU
  sees them, and it times the steps that :func:`attn_tutorial.results.main`'s ``estimate`` scales
  up to a whole run. Loops take part by iterating through :func:`loop`; sizes through :func:`cap`.
* **Configuration keys** (:func:`run_config`, :func:`config_key`): what a checkpoint was trained
  with (architecture, the source code of its layers, data sizes, vocabulary, optimiser settings).
  ``fit`` never reuses a checkpoint whose key differs.
* **Resumable state** (:func:`save_resume_state`): after every finished epoch the model, optimiser,
  scheduler, scaler and early-stopping state go to ``<checkpoint>.resume.pt``; a run killed by a
  cell time limit continues from there.
* **Safe files and one trainer per checkpoint** (:func:`atomic_write`, :func:`exclusive`,
  :func:`one_trainer_per_checkpoint`): every file the package writes goes to a unique temporary
  name in its folder and is renamed into place, so a reader never sees half a file and two writers
  never move each other's temporary file; a lock per checkpoint lets one process train it while
  any other that asks for the same checkpoint (a notebook beside the book build, two students on
  one shared home) waits and then reuses the finished file.
* **Heartbeat** (:class:`Heartbeat`): with ``$ATTN_PROGRESS_FILE`` set (the book build sets it),
  training appends a progress line every ``$ATTN_HEARTBEAT_S`` seconds (default 60): epoch, step,
  elapsed and remaining time, and how the pace compares with the recorded run on this device.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import hashlib
import inspect
import json
import math
import os
import statistics
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# Dry runs
# ---------------------------------------------------------------------------------------------

#: CUDA-only code paths that a dry run on a CPU cannot reach, and why. Printed by
#: ``python -m attn_tutorial.results dry-run`` and listed in the instructor guide.
CUDA_ONLY = (
    ("cuDNN LSTM kernels (chapters 1-4, 6)",
     "nn.LSTM dispatches to cuDNN only on CUDA; the CPU runs the native kernel with the same math"),
    ("nn.LSTM in bf16/fp16 under autocast (chapters 1-4, 6)",
     "cuDNN runs it on a GPU; the CPU's oneDNN has no bf16 LSTM on most CPUs, so a dry run keeps "
     "nn.LSTM in float32 inside autocast (everything around it still runs in bf16/fp16)"),
    ("BiLSTM reverse direction through torch.func.functional_call on CUDA tensors (chapter 1)",
     "the call is device-agnostic and runs here on CPU tensors; only the cuDNN kernel behind it is new"),
    ("autocast dtype choice torch.cuda.is_bf16_supported() (chapter 0)",
     "needs a CUDA device; the dry run forces bf16 or fp16 through $ATTN_AUTOCAST instead"),
    ("fused/flash scaled_dot_product_attention backends",
     "SDPA picks flash or memory-efficient kernels only on CUDA; the CPU uses its own kernels"),
    ("peak GPU memory (torch.cuda.max_memory_allocated) in ch03_memory and ch10_curves",
     "measured only on CUDA; on a CPU the experiments measure resident memory instead"),
    ("flex_attention compiled with Triton (chapter 10)",
     "on a GPU torch.compile generates a Triton kernel; on a CPU the notebook compiles the C++ "
     "kernel (cpu profile) and the tests run the eager reference"),
)


@dataclass
class LoopRecord:
    """One loop seen during a dry run: what it would have done and what one step cost."""

    kind: str  # "train" or "eval"
    planned: float  # iterations the real run makes (data slicing undone), per repetition
    repeat: int  # how often the real run repeats the loop (epochs)
    seconds: list[float] = field(default_factory=list)  # measured time of each body run

    def step_seconds(self) -> float | None:
        """Time of one step: the last measured (the first carries one-off warm-up costs)."""
        if not self.seconds:
            return None
        return self.seconds[-1] if len(self.seconds) > 1 else self.seconds[0]

    def estimate_seconds(self) -> float:
        step = self.step_seconds()
        return 0.0 if step is None else step * self.planned * self.repeat


@dataclass
class DryRun:
    """Settings and measurements of an active dry run."""

    max_steps: int = 2  # iterations of a training loop
    max_eval_batches: int = 1  # iterations of an evaluation loop
    max_examples: int = 256  # rows of a dataset slice
    max_length: int | None = None  # tokens of a sequence model's context (None: the profile's)
    precision: str | None = None  # "bf16" or "fp16": emulate a GPU's autocast on the CPU
    scale: float = 1.0  # full size / sliced size of the last data slice
    loops: list[LoopRecord] = field(default_factory=list)

    def estimate_seconds(self) -> float:
        return sum(record.estimate_seconds() for record in self.loops)


_ACTIVE: contextvars.ContextVar[DryRun | None] = contextvars.ContextVar("attn_dry_run", default=None)
PRECISIONS = ("bf16", "fp16")


def active() -> DryRun | None:
    """The dry run in progress, or None."""
    return _ACTIVE.get()


@contextlib.contextmanager
def dry_run(precision: str | None = None, **settings):
    """Run the enclosed experiment as a dry run; yields the :class:`DryRun` that records it.

    ``precision`` ("bf16" or "fp16") sets ``$ATTN_AUTOCAST`` for the duration so that the
    CPU runs the autocast (and, for fp16, gradient-scaler) path a GPU would run.
    """
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS} or None, got {precision!r}")
    length = settings.get("max_length")
    if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 1):
        raise ValueError(f"max_length must be a positive number of tokens or None, got {length!r}")
    state = DryRun(precision=precision, **settings)
    token = _ACTIVE.set(state)
    saved = os.environ.get("ATTN_AUTOCAST")
    if precision is not None:
        os.environ["ATTN_AUTOCAST"] = precision
    try:
        with _lstm_in_float32() if precision is not None else contextlib.nullcontext():
            yield state
    finally:
        _ACTIVE.reset(token)
        if saved is None:
            os.environ.pop("ATTN_AUTOCAST", None)
        else:
            os.environ["ATTN_AUTOCAST"] = saved


@contextlib.contextmanager
def _lstm_in_float32():
    """Run ``nn.LSTM`` in float32 with autocast off on the CPU and return its outputs in the autocast
    dtype, as cuDNN's LSTM under autocast does (see :data:`CUDA_ONLY`); restored on exit."""
    from torch import nn
    import torch

    original = nn.LSTM.forward

    def forward(self, input, hx=None):
        if not torch.is_autocast_enabled("cpu"):
            return original(self, input, hx)
        dtype = torch.get_autocast_dtype("cpu")
        input = input.to(torch.float32)  # a tensor or a PackedSequence
        if hx is not None:
            hx = tuple(t.to(torch.float32) for t in hx)
        with torch.autocast("cpu", enabled=False):
            output, (h, c) = original(self, input, hx)
        # under autocast on CUDA the LSTM returns the autocast dtype: hand that on, as a GPU would
        return output.to(dtype), (h.to(dtype), c.to(dtype))

    nn.LSTM.forward = forward
    try:
        yield
    finally:
        nn.LSTM.forward = original


def cap(n: int | None, available: int | None = None, what: str = "examples") -> int | None:
    """A data size, cut to the dry run's slice when one is active (else ``n`` unchanged).

    ``n`` None means "all ``available``". The largest ratio full/used (the training split's) is
    kept so that loops over the slice can say how many steps the real run makes.
    """
    state = active()
    if state is None:
        return n
    full = available if n is None else (n if available is None else min(n, available))
    if full is None:
        raise ValueError(f"cap(None) needs the available number of {what} during a dry run")
    used = min(full, state.max_examples)
    state.scale = max(state.scale, full / max(used, 1))  # the training split is the largest slice
    return used


def cap_length(n: int) -> int:
    """A context length, cut to the dry run's ``max_length`` when one is set (else ``n`` unchanged):
    the widths and depths stay the profile's, each step is shorter (CI's CPU dry runs in bfloat16,
    whose matrix products this CPU runs about 20 times slower than float32)."""
    state = active()
    if state is None or state.max_length is None:
        return n
    return min(n, state.max_length)


def epochs(n: int) -> int:
    """A number of epochs: one during a dry run (its loops record how often they repeat)."""
    return n if active() is None else min(n, 1)


def loop(iterable, kind: str = "train", repeat: int = 1, planned: float | None = None):
    """Iterate ``iterable``; during a dry run stop after a few items and time each loop body.

    ``kind`` "train" stops after ``max_steps`` items, "eval" after ``max_eval_batches``.
    ``repeat`` (e.g. the epochs) and ``planned`` (items of the real run; default the length of
    ``iterable`` times the data slice's scale) feed the time estimate.
    """
    state = active()
    if state is None:
        yield from iterable
        return
    if kind not in ("train", "eval"):
        raise ValueError(f"kind must be 'train' or 'eval', got {kind!r}")
    if planned is None:
        try:
            planned = len(iterable) * state.scale
        except TypeError:
            planned = 0.0
    record = LoopRecord(kind, float(planned), int(repeat))
    state.loops.append(record)
    limit = state.max_steps if kind == "train" else state.max_eval_batches
    for i, item in enumerate(iterable):
        if i >= limit:
            break
        start = time.perf_counter()
        yield item
        record.seconds.append(time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# Files written safely, and one trainer per checkpoint
# ---------------------------------------------------------------------------------------------

def atomic_write(path: str | os.PathLike, write) -> Path:
    """Create ``path`` through ``write(temporary_path)``, atomically; return ``path``.

    ``write`` fills a temporary file with a name of its own (process id and a random part) in the
    same folder, which is then renamed to ``path`` (``os.replace``: atomic on POSIX and Windows).
    A reader sees the old file or the whole new one, never half of one; two processes writing the
    same path at once each rename their own file (the last one wins) instead of moving the other's.
    """
    import uuid

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def atomic_save(obj, path: str | os.PathLike) -> Path:
    """``torch.save(obj, path)`` through :func:`atomic_write`."""
    import torch

    return atomic_write(path, lambda temporary: torch.save(obj, temporary))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """``Path(path).write_text(text)`` (UTF-8) through :func:`atomic_write`."""
    return atomic_write(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file that guards ``path``: ``<path>.lock`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, doing: str = "writing"):
    """Hold the lock of ``path`` (:func:`lock_path`) for the enclosed block.

    A second process asking for the same lock says what it waits for and blocks until the first
    releases it (the operating system releases it too when the holder dies, so a killed run never
    leaves a stale lock). Use it around "check whether the file exists, else make it" so that only
    one process makes it. Locks are advisory (``filelock``: ``flock`` on POSIX); a network file system
    without working locks degrades to the old behaviour, two processes doing the work.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(lock_path(path))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"Another process is {doing} {Path(path).name}: waiting for it to finish "
              f"(lock {lock.lock_file}) ...", flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def one_trainer_per_checkpoint(train):
    """Decorate a training function with a ``checkpoint`` argument: while it trains into a checkpoint,
    any other process calling it for the same checkpoint waits, then finds the finished file and
    reuses it instead of training it a second time. Without a checkpoint, or in a dry run (which
    writes none), it runs unlocked."""
    signature = inspect.signature(train)

    @functools.wraps(train)
    def locked(*args, **kwargs):
        checkpoint = signature.bind_partial(*args, **kwargs).arguments.get("checkpoint")
        if checkpoint is None or active() is not None:
            return train(*args, **kwargs)
        with exclusive(checkpoint, doing="training"):
            return train(*args, **kwargs)

    return locked


# ---------------------------------------------------------------------------------------------
# Configuration keys of checkpoints
# ---------------------------------------------------------------------------------------------

class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used (truncated, foreign, or of another model)."""


RETRAIN_HINT = "delete it, or train again with retrain=True (ATTN_RETRAIN=1, or --retrain on the command line)"


def _class_source(cls) -> str:
    """The code of a class without its docstrings and comments: editing the documentation of a layer
    keeps its checkpoints, editing what it computes does not."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # a class typed into a notebook or a console: no file to read
        return f"{cls.__module__}.{cls.__qualname__}"
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)  # comments and layout are gone too


def model_code_version(model) -> str:
    """A hash of the source code of every class the model is built from (its own layers only:
    torch's are pinned by the torch version). Editing what a layer computes changes the version;
    editing its docstrings or comments does not."""
    classes = sorted({type(m) for m in model.modules() if not type(m).__module__.startswith("torch.")},
                     key=lambda c: (c.__module__, c.__qualname__))
    digest = hashlib.sha256()
    for cls in classes:
        digest.update(f"{cls.__module__}.{cls.__qualname__}\n{_class_source(cls)}".encode())
    return digest.hexdigest()[:16]


def _length(obj) -> int | None:
    try:
        return len(obj)
    except TypeError:
        return None


def _vocabulary(loader) -> str | None:
    dataset = getattr(loader, "dataset", None)
    vocab = getattr(dataset, "vocab", None)
    tokens = getattr(vocab, "itos", None)
    if tokens is None:
        return None
    return hashlib.sha256("\n".join(tokens).encode()).hexdigest()[:16]


def run_config(model, train_loader, val_loader, **settings) -> dict:
    """Everything a trained checkpoint depends on, as plain JSON-able values."""
    import torch

    return {
        "model": f"{type(model).__module__}.{type(model).__qualname__}",
        "architecture": repr(model),
        "parameters": sum(p.numel() for p in model.parameters()),
        "model_code": model_code_version(model),
        "train_batches": _length(train_loader),
        "train_examples": _length(getattr(train_loader, "dataset", None)),
        "val_examples": _length(getattr(val_loader, "dataset", None)) or _length(val_loader),
        "vocabulary": _vocabulary(train_loader),
        "torch": torch.__version__.split("+")[0],
        **{key: value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)
           for key, value in settings.items()},
    }


def config_key(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def config_changes(old: dict | None, new: dict) -> list[str]:
    """Names of the entries that differ (all of them when ``old`` is missing)."""
    if not isinstance(old, dict):
        return ["(the checkpoint predates configuration keys)"]
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def reuse_finished(model, checkpoint: Path | None, key: str, device, retrain: bool = False) -> dict | None:
    """Load ``checkpoint`` into ``model`` if it finished training with configuration ``key`` and
    return its recorded history; None (train) for no checkpoint, a dry run, ``retrain`` or another
    configuration (said in one line)."""
    if checkpoint is None or active() is not None or retrain or not checkpoint.is_file():
        return None
    payload = read_checkpoint(checkpoint, map_location=device)
    if payload.get("config_key") == key and payload.get("finished"):
        load_weights(model, payload["model"], checkpoint)
        print(f"Loaded the finished checkpoint .../{checkpoint.parent.name}/{checkpoint.name}: no training needed.")
        return payload["history"]
    print(f"The checkpoint {checkpoint} was trained with another configuration: training again.")
    return None


def read_checkpoint(path: Path, map_location="cpu") -> dict:
    """Load a course checkpoint safely; any unreadable or foreign file is a :class:`CheckpointError`
    naming the file and the way out."""
    import torch

    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # truncated zip, foreign pickle, wrong format: all the same to a reader
        first_line = (str(error).splitlines() or ["no message"])[0][:200]
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(error).__name__}: {first_line}); "
            f"it is truncated or not a checkpoint of this course: {RETRAIN_HINT}") from error
    if not isinstance(payload, dict) or "model" not in payload:
        raise CheckpointError(f"{path} is not a checkpoint of this course (no 'model' entry): {RETRAIN_HINT}")
    return payload


def load_weights(model, state: dict, path: Path) -> None:
    """``model.load_state_dict`` with an error that names the checkpoint."""
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        first_line = (str(error).splitlines() or ["no message"])[0][:200]
        raise CheckpointError(
            f"checkpoint {path} holds weights of another model ({first_line}): "
            f"{RETRAIN_HINT}") from error


def resume_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name.removesuffix(".pt") + ".resume.pt")


def save_resume_state(checkpoint: Path, key: str, **state) -> None:
    """Atomically write the state to continue training after the epoch just finished."""
    atomic_save({"config_key": key, **state}, resume_path(checkpoint))


def load_resume_state(checkpoint: Path, key: str, map_location="cpu") -> dict | None:
    """The saved state of an interrupted run with the same configuration, else None (a stale or
    unreadable resume file is deleted: it can only be restarted from scratch)."""
    import torch

    path = resume_path(checkpoint)
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception:
        print(f"The resume state {path} is unreadable (interrupted while writing?): training from the start.")
        path.unlink(missing_ok=True)
        return None
    if not isinstance(state, dict) or state.get("config_key") != key:
        print(f"The resume state {path} belongs to another configuration: training from the start.")
        path.unlink(missing_ok=True)
        return None
    return state


def drop_resume_state(checkpoint: Path) -> None:
    resume_path(checkpoint).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# What is running, and a heartbeat for unattended builds
# ---------------------------------------------------------------------------------------------

_CURRENT: contextvars.ContextVar[dict | None] = contextvars.ContextVar("attn_current_run", default=None)


@contextlib.contextmanager
def current_run(**info):
    """Label the enclosed training (experiment, profile, seed, expected seconds per epoch)."""
    token = _CURRENT.set(info)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def fmt_duration(seconds: float) -> str:
    """``95`` -> ``'1 min 35 s'``; ``'unknown'`` for a non-finite number."""
    if not math.isfinite(seconds):
        return "unknown"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Heartbeat:
    """Append a progress line to ``$ATTN_PROGRESS_FILE`` at most every ``$ATTN_HEARTBEAT_S`` seconds.

    A notebook executed by the book build has no visible progress bar; the build prints this
    file as it grows, so a slow cell is visibly alive, and a pace far below the recorded one says
    that the machine is busy rather than the code stuck.
    """

    SLOW = 2.0  # a pace this many times below the recorded one is reported as a busy machine

    def __init__(self, epochs: int):
        self.path = os.environ.get("ATTN_PROGRESS_FILE") or None
        try:
            self.every = float(os.environ.get("ATTN_HEARTBEAT_S", "60") or 60)
        except ValueError:
            raise ValueError(f"ATTN_HEARTBEAT_S must be a number of seconds, got "
                             f"{os.environ['ATTN_HEARTBEAT_S']!r}") from None
        self.epochs = epochs
        self.info = _CURRENT.get() or {}
        self.start = self.last = time.perf_counter()
        self.epoch_start = self.start

    def new_epoch(self) -> None:
        self.epoch_start = time.perf_counter()

    def beat(self, epoch: int, step: int, steps: int | None) -> None:
        if self.path is None:
            return
        now = time.perf_counter()
        if now - self.last < self.every:
            return
        self.last = now
        label = " · ".join(str(self.info[k]) for k in ("experiment", "profile") if self.info.get(k))
        if "seed" in self.info:
            label += f" · seed {self.info['seed']}"
        elapsed = now - self.epoch_start
        line = f"[{label or 'training'}] epoch {epoch}/{self.epochs}, step {step}"
        pace = None
        if steps:
            line += f"/{steps}"
            pace = elapsed / step * steps  # this epoch's projected length
            line += f", {fmt_duration(elapsed)} into the epoch, about {fmt_duration(pace - elapsed)} left in it"
        else:
            line += f", {fmt_duration(elapsed)} into the epoch"
        expected = self.info.get("expected_epoch_s")
        if pace is not None and expected:
            ratio = pace / expected
            line += f" (recorded: {fmt_duration(expected)} per epoch on this device"
            line += f"; {ratio:.1f}x slower: the machine is busy or slower)" if ratio >= self.SLOW else ")"
            if ratio >= self.SLOW:
                line += self._fewer_threads()
        line += f"; {fmt_duration(now - self.start)} in this run"
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


    @staticmethod
    def _fewer_threads() -> str:
        """On a machine that became busy: one CPU thread per core still free (threads waiting for a
        descheduled one are what makes small-tensor training this slow); what changed, or ''."""
        import torch

        from .profiles import THREADS_ENV, choose_cpu_threads

        before = torch.get_num_threads()
        if before == 1 or any(os.environ.get(name, "").strip() for name in THREADS_ENV):
            return ""
        threads, _ = choose_cpu_threads(sample_s=0.2)
        if threads >= before:
            torch.set_num_threads(before)
            return ""
        return f"; CPU threads {before} -> {threads}, one per free core"


def recorded_epoch_seconds(records: list[dict], profile: str, device: str) -> float | None:
    """Median recorded seconds per epoch of ``profile`` runs on ``device`` (None if none)."""
    times = [run["time_per_epoch_s"] for record in records if record.get("profile") == profile
             for run in record.get("runs", []) if run.get("device") == device and run.get("time_per_epoch_s")]
    return statistics.median(times) if times else None
