"""Run a user's program under torch.profiler and write its Chrome trace (torch imported lazily).

Two ways in, one result (a Chrome trace that `rooftop.models.trace.read` reads):

- `run_script(argv, trace_path, steps)`: runs `python script.py ARGS…` (or
  `python -m module ARGS…`) in this process with `runpy`, its argv set, as
  `rooftop profile -- python script.py …` does.
- `profile(...)`: a context manager (`with profile(steps=3) as p: … p.step()`)
  and a decorator (`@profile(steps=3)`: each call is one step), for code that
  cannot be run as a script. `rooftop` is a namespace package, so this is
  imported as `from rooftop.probes.profiler import profile`.

Overhead stays low by recording only a few steps (`steps`): the first step
(warm-up: lazy initialisation, autotuning) is recorded and thrown away, the
next `steps` are kept, and the profiler stops after them so the rest of the
program runs at full speed. A step ends at each `p.step()`, or, for a script,
each time an outermost `torch.nn.Module` call returns (one forward of the
model). A program that never calls a module is recorded whole.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from rooftop.models.errors import BadInput

SKIP_STEPS = 1  # the warm-up step, recorded and discarded


class ProgramFailed(BadInput):
    """The user's program raised or exited non-zero; `status` is its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class NotPython(BadInput, ValueError):
    """The command after `--` is not a Python program rooftop can run in-process."""


@dataclass
class Recording:
    """What a profiled run left: the trace file, the steps seen, and the steps kept."""

    trace_path: Path
    steps_seen: int
    steps_kept: int
    whole_run: bool  # no step boundary was seen: the trace covers the whole program
    warmup_only: bool = False  # the program ended after its warm-up step: the trace is that step


class Recorder:
    """torch.profiler driven by step boundaries: discard the warm-up step, keep `steps`, then stop."""

    def __init__(self, trace_path: str | os.PathLike[str], steps: int = 3, skip: int = SKIP_STEPS) -> None:
        if steps < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        self.trace_path = Path(trace_path)
        self.steps, self.skip = steps, skip
        self.seen = 0
        self._prof: Any = None
        self._done = False
        self._kept_from: int | None = None
        self._warmup_written = False

    def _new_profiler(self) -> Any:
        # deferred: torch, only when a program is profiled
        import torch
        from torch.profiler import ProfilerActivity, profile as torch_profile

        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        return torch_profile(activities=acts, record_shapes=True)

    def _threads_metadata(self) -> None:
        """The program's torch threads, in the trace: a CPU roof measured with fewer is said to be low."""
        # deferred: torch, only when a program is profiled
        import torch

        add = getattr(self._prof, "add_metadata", None)
        if add is not None:
            add("rooftop_cpu_threads", str(torch.get_num_threads()))

    def start(self) -> None:
        self._prof = self._new_profiler()
        with _quiet_stderr():
            self._prof.start()
        self._threads_metadata()
        if self.skip == 0:
            self._kept_from = 0

    def step(self) -> None:
        """One step ended: after the warm-up, restart clean; after `steps` more, stop and keep."""
        self.seen += 1
        if self._done:
            return
        if self.seen == self.skip:
            self._sync()
            with _quiet_stderr():
                self._prof.stop()
            # kept only in case the program ends before another step: then it is all there is
            self._export()
            self._warmup_written = True
            self._prof = self._new_profiler()
            with _quiet_stderr():
                self._prof.start()
            self._threads_metadata()
            self._kept_from = self.seen
        elif self.seen == self.skip + self.steps:
            self._finish()

    @property
    def done(self) -> bool:
        """The kept steps are written: the rest of the program runs unprofiled."""
        return self._done

    def _sync(self) -> None:
        # deferred: torch, only when a program is profiled
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def _export(self) -> None:
        self.trace_path.parent.mkdir(parents=True, exist_ok=True)
        part = partial_path(self.trace_path)
        self._prof.export_chrome_trace(str(part))
        os.replace(part, self.trace_path)  # a trace under its name is whole, even if the process is killed

    def _finish(self, write: bool = True) -> None:
        if self._done or self._prof is None:
            return
        self._sync()
        with _quiet_stderr():
            self._prof.stop()
        if write:
            self._export()
        self._done = True

    def stop(self) -> Recording:
        """End of the program: keep what the profiler holds (if it still runs) and say what it covers.

        A program that ended right after its warm-up step keeps the warm-up step's trace."""
        warmup_only = not self._done and self._warmup_written and self.seen == self._kept_from
        self._finish(write=not warmup_only)
        kept = 0 if self._kept_from is None else min(self.seen - self._kept_from, self.steps)
        return Recording(self.trace_path, self.seen, kept, whole_run=self.seen == 0, warmup_only=warmup_only)


def partial_path(path: Path) -> Path:
    """Where a trace is written before it takes its name (`.NAME.part`, and `.gz` kept where the name has it:
    torch compresses by the name); no trace reader takes such a file for a trace."""
    return path.with_name(f".{path.name}.part" + (".gz" if path.name.endswith(".gz") else ""))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 while the profiler starts or stops: libkineto logs a line at each
    (`USDT: … profiler_start`), which is not the program's output. ROOFTOP_DEBUG=1 keeps them."""
    if os.environ.get("ROOFTOP_DEBUG"):
        yield
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to silence
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


class _StepHooks:
    """Global nn.Module hooks: a step ends when an outermost module call returns."""

    def __init__(self, on_step: Callable[[], None]) -> None:
        self.depth = 0
        self.on_step = on_step
        self.handles: list[Any] = []

    def __enter__(self) -> "_StepHooks":
        # deferred: torch, only when a program is profiled
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        def pre(_m: Any, _a: Any) -> None:
            self.depth += 1

        def post(_m: Any, _a: Any, _o: Any) -> None:
            self.depth = max(0, self.depth - 1)
            if self.depth == 0:
                self.on_step()

        self.handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.handles:
            h.remove()


def python_target(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """('path', script, args) or ('module', name, args) from `python script.py ARGS…` / `python -m mod ARGS…`
    (the leading `python` may be left out); NotPython otherwise."""
    args = list(argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        raise NotPython("no program given: put it after --, e.g. rooftop profile -- python train.py")
    after_python = Path(args[0]).name.startswith("python") or args[0] == sys.executable
    if after_python:
        args = args[1:]
        while args and args[0] in ("-u", "-B", "-O", "-X") or (args and args[0].startswith("-X")):
            args = args[2:] if args[0] == "-X" else args[1:]
    if not args:
        raise NotPython("no script given after python: rooftop profile -- python script.py ARGS…")
    if args[0] == "-m":
        if len(args) < 2:
            raise NotPython("python -m needs a module name")
        return "module", args[1], args[2:]
    if args[0].startswith("-"):
        raise NotPython(f"python option {args[0]!r} is not supported here; give a script or -m module")
    script = Path(args[0])
    named_python = after_python or args[0].endswith(".py")
    if not script.is_file():
        if not named_python:
            raise NotPython(f"{args[0]!r} is not a Python program; rooftop profile runs Python programs "
                            "(-- python script.py ARGS…)")
        raise NotPython(f"{args[0]}: no such script")
    if not named_python and not _python_shebang(script):
        raise NotPython(f"{args[0]!r} is not a Python program; rooftop profile runs Python programs "
                        "(-- python script.py ARGS…)")
    return "path", args[0], args[1:]


def _python_shebang(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            line = f.readline(200)
    except OSError:
        return False
    return line.startswith(b"#!") and b"python" in line


def run_script(argv: Sequence[str], trace_path: str | os.PathLike[str], steps: int = 3,
               keep: list[object] | None = None) -> Recording:
    """Run a Python program in this process under the profiler; ProgramFailed if it fails.

    Its output goes where this process's goes; an exception it raises is printed as
    Python would (its own frames only), and exit status 1 reported.

    `keep`, where given, gets what the program leaves however it ends: its module's globals
    (runpy's copy), or the exception that ended it (SystemExit too), whose frames hold its
    globals and locals. Held there, nothing the program made is freed when it ends. A rank
    keeps it until it leaves by os._exit (rankrun): freed here, a DDP model whose gloo group
    was destroyed frees the group's last reference, and the group's destructor joins its
    worker thread with the GIL held while that thread waits for the GIL: the rank hangs.
    """
    hold = keep.append if keep is not None else _drop
    kind, target, args = python_target(argv)
    rec = Recorder(trace_path, steps)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target if kind == "path" else target, *args]
    if kind == "path":
        sys.path.insert(0, str(Path(target).resolve().parent))
    else:
        sys.path.insert(0, os.getcwd())
    status = 0
    try:
        rec.start()
        with _StepHooks(rec.step):
            try:
                if kind == "path":
                    hold(runpy.run_path(target, run_name="__main__"))
                else:
                    hold(runpy.run_module(target, run_name="__main__", alter_sys=True))
            except SystemExit as exc:
                hold(exc)
                code = exc.code
                status = code if isinstance(code, int) else (0 if code is None else 1)
                if code is not None and not isinstance(code, int):
                    sys.stderr.write(f"{code}\n")
            except KeyboardInterrupt as exc:
                hold(exc)
                raise
            except BaseException as exc:  # the user's program's own error
                hold(exc)
                _print_user_traceback(exc)
                status = 1
        recording = rec.stop()
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.stdout.flush()
    if status != 0:
        raise ProgramFailed(f"{target} exited with status {status}; nothing to show", status)
    return recording


def _drop(_what: object) -> None:
    """Nothing to keep: what the program left is freed as run_script returns."""


def _print_user_traceback(exc: BaseException) -> None:
    """The traceback as Python would print it, without rooftop's and runpy's frames."""
    tb = exc.__traceback__
    here = {os.path.abspath(__file__), os.path.abspath(runpy.__file__)}

    def ours(name: str) -> bool:
        return name.startswith("<frozen runpy") or os.path.abspath(name) in here

    while tb is not None and ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))


def rank_trace_path(trace: str | os.PathLike[str]) -> Path:
    """Inside a rank of a distributed job (torchrun sets RANK and WORLD_SIZE), one trace per rank:
    `{rank}` in the name is the rank, and a name without it gets `.rank-N` before its suffix
    (run.trace.json → run.rank-3.trace.json), so `rooftop profile --trace DIR` reads them as one job."""
    text = os.fspath(trace)
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if "{rank}" in text:
        return Path(text.replace("{rank}", rank or "0"))
    if rank is None or not world or not world.isdigit() or int(world) < 2:
        return Path(text)
    p = Path(text)
    stem, dot, rest = p.name.partition(".")
    return p.with_name(f"{stem}.rank-{rank}{dot}{rest}" if dot else f"{stem}.rank-{rank}")


class profile:  # used like a function, as torch.profiler.profile is
    """Profile a block or a function and write its Chrome trace (read it with `rooftop profile --trace`).

        with profile(steps=3, trace="run.trace.json") as p:
            for batch in data:
                model(batch)
                p.step()
        # then: rooftop profile --trace run.trace.json -d h100   (the same report a script run gets)

        @profile(steps=3, trace="run.trace.json")
        def step(batch): ...        # each call is one step

    The trace is the one `rooftop profile -- python script.py` records; `rooftop profile --trace FILE`
    places it on a device's roofline and keeps it in the store. In a rank of a distributed job each rank
    writes its own trace (`rank_trace_path`); `rooftop profile --trace DIR` reads them as one job.
    """

    def __init__(self, steps: int = 3, trace: str | os.PathLike[str] = "rooftop-profile.trace.json",
                 skip: int = SKIP_STEPS) -> None:
        self.recorder = Recorder(rank_trace_path(trace), steps, skip)
        self.recording: Recording | None = None

    def __enter__(self) -> "profile":
        self.recorder.start()
        return self

    def step(self) -> None:
        self.recorder.step()

    def __exit__(self, *exc: object) -> None:
        self.recording = self.recorder.stop()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        started = False

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal started
            if not started:
                self.recorder.start()
                atexit.register(self.finish)  # called fewer times than skip + steps: still write the trace
                started = True
            try:
                return fn(*args, **kwargs)
            finally:
                self.recorder.step()
                if self.recorder.done and self.recording is None:
                    self.recording = self.recorder.stop()

        wrapper.profiler = self  # type: ignore[attr-defined]  # a function takes attributes; its type does not say
        return wrapper

    def finish(self) -> Recording:
        """For a decorated function called fewer times than skip + steps: write what was recorded."""
        if self.recording is None:
            self.recording = self.recorder.stop()
        return self.recording
