"""What a user sees: the screen as lines of text, and a store whose runs draw the same every time."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.store.runs import Run, Store

NEW_YEAR_2026 = 1767225600.0  # 2026-01-01 00:00 UTC: runs start at fixed times (tests set TZ=UTC)


def screen_lines(app: App) -> list[str]:
    """The screen as text, one string per terminal row (what a snapshot shows, without colour).

    Reads the compositor (private, but Textual is pinned below 9): an SVG screenshot
    splits a row into styled spans, which makes "is this cell whole" hard to ask.
    """
    return [strip.text for strip in app.screen._compositor.render_strips()]


def printed(content: object, width: int = 100) -> str:
    """A widget's content (a Static's Rich renderable) as a console of `width` columns prints it, as text."""
    import io

    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(content)
    return console.export_text()


def assert_visible(app: App, *texts: str) -> None:
    """Each text is on screen whole, within one row (not cut at an edge, not wrapped)."""
    lines = screen_lines(app)
    missing = [t for t in texts if not any(t in line for line in lines)]
    assert not missing, f"not on screen whole: {missing}\n" + "\n".join(lines)


def _stats(t: float) -> TimeStats:
    return TimeStats(median_s=t, p10_s=t * 0.98, p90_s=t * 1.02, min_s=t * 0.97, iqr_ratio=0.02, repeats=7, calls=10)


def gloo_sweep(store: Store) -> str:
    """Keep a complete `rooftop comm` sweep (gloo, world 4: two allreduce sizes) in `store`; its run id."""
    from rooftop.probes.comm import CommPlan, point_sample
    from rooftop.store.comms import begin_comm, comm_device_info

    plan = CommPlan("gloo", 4, (8, 2**20))
    rid = begin_comm(store, comm_device_info("gloo", 4, "Test CPU", "quick"), "gloo")
    for size, t in ((8, 20e-6), (2**20, 20e-6 + 2**20 / 1e9)):
        store.add_sample(rid, point_sample(plan, {"collective": "allreduce", "size": size,
                                                  "stats": _stats(t).__dict__}))
    store.finish_run(rid, "complete")
    return rid


def _run(rid: str, device: str, backend: str, status: str, hours: float, name: str | None = None) -> Run:
    return Run(id=rid, device_key=f"box/{device}/0", host="box", device={"name": device, "index": 0},
               backend=backend, plan="quick", started_at=NEW_YEAR_2026 + 3600 * hours, status=status, name=name)


def fixed_runs_db(path: Path) -> list[str]:
    """Two runs with fixed ids and times: a complete one named lab-box, a cancelled one with a long CPU name."""
    samples = [
        Sample("read_reduce", "fp32", {"n": 2**26}, flops=2**26, bytes=4 * 2**26, footprint_bytes=4 * 2**26,
               stats=_stats(0.01), path="fp32-fma"),
        Sample("gemm", "bf16", {"m": 4096, "n": 4096, "k": 4096}, flops=2 * 4096**3, bytes=6 * 4096**2,
               stats=_stats(0.0002), path="bf16-tc"),
    ]
    profile = DeviceProfile(
        id="lab-box", name="NVIDIA H100 80GB HBM3", source="measured", kind="gpu",
        bandwidth={"dram": Ceiling(2.9e12, "measured", "read_reduce:268435456")},
        peak={"bf16-tc": Ceiling(687e12, "measured", "4096x4096x4096")})
    complete = _run("5ca1ab1e" + "0" * 24, "NVIDIA H100 80GB HBM3", "cuda", "complete", 9.5, name="lab-box")
    cancelled = _run("c0ffee00" + "1" * 24, "AMD EPYC 7763 64-Core Processor", "cpu", "cancelled", 10.25)
    with Store.open(path) as store:
        store.insert_run(complete, samples, profile=profile)
        store.insert_run(cancelled, samples[:1])
    return [complete.id, cancelled.id]
