"""A signal to `rooftop profile -- torchrun …` is a stop, not an internal error: real processes on the CPU.

Each test starts the real command as a child in a session of its own, waits until both ranks run and have
written their traces, sends the signal as it comes in use (Ctrl-C: SIGINT to rooftop's foreground group,
which torch's ranks are not in: each has a session of its own; SIGTERM and SIGHUP: to rooftop), and checks:
the exit status 128 + N, one line on stderr and nothing else, no process the child started alive (walked
in /proc: its descendants and their sessions), and TMPDIR (the test's own) left empty: no torchelastic_*
nor rooftop-profile-* folder (torch's own compile cache aside). The traces already written are deleted (a temporary folder)
or kept (--save-trace DIR), as the line says.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctrlc import popen_kwargs

RUNS_ON = """
import time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.Linear(8, 8)
x = torch.ones(4, 8)
while True:  # until stopped; each call of the model is a step: after two, the rank's trace is written
    model(x).sum().backward()
    dist.all_reduce(model.weight.grad)
    time.sleep(0.02)
"""


# torch's compile cache, which torch.profiler makes in the temporary folder and keeps by design (as for any
# program it profiles): torch's, not a leftover of the run
TORCH_CACHE = f"torchinductor_{getpass.getuser()}"


def processes() -> dict[int, tuple[int, int, str]]:
    """Every live process: pid → (parent pid, session id, start time)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if fields[0] != "Z":  # state, ppid, pgrp, session, …, start time (the 22nd field)
            found[int(entry.name)] = (int(fields[1]), int(fields[3]), fields[19])
    return found


def family(root: int, known: dict[int, str] | None = None) -> dict[int, str]:
    """The live processes descended from `root` (pid → start time, so a reused pid is not taken for one), and
    those of every session one of them leads (torch starts each rank in a session of its own), with `known`
    ones still alive: a process re-parented after its parent died is still found."""
    procs = processes()
    out = {pid: start for pid, start in (known or {}).items() if procs.get(pid, (0, 0, ""))[2] == start}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, sid, start) in procs.items():
            if pid not in out and pid != root and (ppid == root or ppid in out or sid in out or sid == root):
                out[pid] = start
                grew = True
    return out


def start(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[str], Path]:
    """`rooftop profile … -- torchrun --standalone --nproc-per-node 2 runs.py` with TMPDIR the test's own."""
    script = tmp_path / "runs.py"
    script.write_text(RUNS_ON)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}  # no launcher banner
    proc = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", "profile", "--steps", "1", "--no-save",
                             *options, "--", "torchrun", "--standalone", "--nproc-per-node", "2", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, **popen_kwargs())
    return proc, tmp


def wait_for_traces(proc: subprocess.Popen[str], folder_glob: tuple[Path, str], limit_s: float = 180) -> None:
    """Until both ranks have written their traces (they run on, stepping), failing if rooftop ends first."""
    folder, pattern = folder_glob
    deadline = time.monotonic() + limit_s
    while len(list(folder.glob(pattern))) < 2:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"rooftop profile ended ({proc.returncode}) before both ranks wrote a trace: {err[-2000:]}")
        assert time.monotonic() < deadline, f"the ranks wrote no traces in {limit_s} s"
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str], sig: signal.Signals, group: bool) -> tuple[str, str, dict[int, str]]:
    """Send `sig` (to rooftop's process group, as a terminal's Ctrl-C, or to rooftop alone); its output, and
    the processes it had started."""
    started = family(proc.pid)
    assert len(started) >= 2, started  # the walk sees the ranks while they run
    (os.killpg if group else os.kill)(proc.pid, sig)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill(family(proc.pid, started))
        proc.kill()
        proc.communicate()
        pytest.fail(f"rooftop profile did not end within 60 s of {sig.name}")
    return out, err, started


def kill(pids: dict[int, str]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def nothing_left(proc: subprocess.Popen[str], started: dict[int, str], tmp: Path) -> None:
    """No process rooftop started is alive once it has ended, and its TMPDIR is empty."""
    left = family(proc.pid, started)
    kill(left)
    assert not left, f"processes left behind: {left}"
    assert sorted(p.name for p in tmp.iterdir() if p.name != TORCH_CACHE) == []


@pytest.mark.parametrize(("sig", "group"), [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGTERM-to-rooftop", "Ctrl-C-to-the-group"])
def test_a_stop_signal_stops_the_job_and_deletes_its_temporary_traces(tmp_path, sig, group):
    proc, tmp = start(tmp_path)
    wait_for_traces(proc, (tmp, "rooftop-profile-*/rank-*.trace.json"))
    out, err, started = stop(proc, sig, group)
    assert proc.returncode == 128 + sig, err
    assert err.splitlines() == [f"rooftop profile: stopped by {sig.name}: the job and its ranks are stopped; "
                                "nothing is kept (the 2 rank traces written so far are deleted; --save-trace DIR "
                                "keeps them)"], err
    assert out == ""
    nothing_left(proc, started, tmp)


def test_a_hangup_keeps_the_traces_written_in_the_save_trace_folder(tmp_path):
    """SIGHUP (the SSH session closed) with --save-trace DIR: each trace written is kept whole, nothing else."""
    from rooftop.store.tracefile import load_trace

    traces = tmp_path / "traces"
    traces.mkdir()
    old = traces / "rank-2.trace.json"  # a trace of an earlier job kept there: not this one's, left as it is
    old.write_text('{"traceEvents": []}')
    proc, tmp = start(tmp_path, "--save-trace", str(traces))
    wait_for_traces(proc, (traces, "rank-[01].trace.json"))  # this job's two ranks (rank-2 was there before)
    out, err, started = stop(proc, signal.SIGHUP, group=False)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert err.splitlines() == [f"rooftop profile: stopped by SIGHUP: the job and its ranks are stopped; no profile "
                                f"is kept; the 2 rank traces written so far are kept in {traces}"], err
    assert sorted(p.name for p in traces.iterdir()) == ["rank-0.trace.json", "rank-1.trace.json", old.name]
    assert all(load_trace(traces / f"rank-{r}.trace.json").ops for r in (0, 1))  # whole: each one reads
    assert old.read_text() == '{"traceEvents": []}'
    nothing_left(proc, started, tmp)


def test_a_stop_before_the_job_starts_starts_no_rank(tmp_path):
    """SIGTERM while torch loads: the launch never starts; one line, 143, no temporary folder left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = ("import os, signal\n"
            "from rooftop.probes import torchrun\n"
            "real = torchrun.run_torchrun\n"
            "def launch(*args, **kwargs):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    return real(*args, **kwargs)\n"
            "torchrun.run_torchrun = launch\n"
            "from rooftop.tui.cli import main\n"
            "raise SystemExit(main(['profile', '--no-save', '--', 'torchrun', '--standalone', '--nproc-per-node', "
            f"'2', {str(tmp_path / 'never.py')!r}]))\n")
    (tmp_path / "never.py").write_text("raise SystemExit('a rank started')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 128 + signal.SIGTERM, out.stderr
    assert out.stderr == "rooftop profile: stopped by SIGTERM before the job started; nothing is kept\n"
    assert out.stdout == "" and [p.name for p in tmp.iterdir() if p.name != TORCH_CACHE] == []


STEPS = """
import torch
model = torch.nn.Linear(8, 8)
for _ in range(3):
    model(torch.ones(4, 8))
"""


def test_a_stop_after_the_ranks_ended_lets_the_report_finish(tmp_path, monkeypatch):
    """SIGTERM as the traces are read (the ranks are done): the report is made whole, then 143 and one line."""
    import json

    from inprocess import run_main
    from rooftop.tui.commands import job, profile  # noqa: F401 - profile first: it binds the real profile_job

    real = job.profile_job

    def report(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # taken by the command's own handler: it records, nothing raises
        return real(*args, **kwargs)

    monkeypatch.setattr(job, "profile_job", report)
    monkeypatch.delenv("TORCHELASTIC_SIGNALS_TO_HANDLE", raising=False)  # torch's launcher sets it: undone after
    script = tmp_path / "steps.py"
    script.write_text(STEPS)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)}
    out = run_main("profile", "--steps", "1", "--json", "--no-save", "-d", "h100", "--", "torchrun", "--standalone",
                   "--nproc-per-node", "2", str(script), OMP_NUM_THREADS="1")
    assert out.returncode == 128 + signal.SIGTERM, out.stderr
    assert out.stderr.splitlines()[-1] == "rooftop profile: stopped by SIGTERM after the job ended; the report is complete"
    assert [r["rank"] for r in json.loads(out.stdout)["ranks"]] == [0, 1]
    assert {sig: signal.getsignal(sig) for sig in before} == before  # torch's launcher leaves its own in place
