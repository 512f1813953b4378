"""Live: telemetry sparklines, and the running measurement with its curve growing."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Label, Sparkline, Static

from rooftop.probes.telemetry import Snapshot

HISTORY = 120  # points per sparkline

# (key, label, unit, how to read it from a snapshot)
GPU_TRACES = (
    ("util", "GPU util", "%", lambda g: g.gpu_util_pct),
    ("sm", "SM clock", "MHz", lambda g: g.sm_clock_mhz),
    ("power", "power", "W", lambda g: g.power_w),
    ("temp", "temp", "°C", lambda g: g.temperature_c),
    ("mem", "memory", "GiB", lambda g: g.memory_used_bytes / 2**30 if g.memory_used_bytes is not None else None),
)
CPU_TRACES = (
    ("util", "CPU util", "%", lambda c: c.util_pct),
    ("sm", "CPU clock", "MHz", lambda c: c.freq_mhz),
    ("mem", "memory", "GiB", lambda c: c.memory_used_bytes / 2**30),
)
VALUE_FORMAT = {"mem": "{:,.1f}"}


@dataclass
class Telemetry(Message):
    """A snapshot from the sampler thread (post_message is thread-safe)."""

    snapshot: Snapshot


class TelemetryPanel(Widget):
    """Sparklines of the first GPU (or the CPU when there is none)."""

    DEFAULT_CSS = """
    TelemetryPanel { height: auto; }
    TelemetryPanel .trace { height: 1; }
    TelemetryPanel .trace Label { width: 11; }
    TelemetryPanel .trace Sparkline { width: 1fr; }
    TelemetryPanel .trace .value { width: 14; text-align: right; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.data: dict[str, deque[float]] = {k: deque(maxlen=HISTORY) for k, *_ in GPU_TRACES}
        self.source = "waiting for the first sample"

    def compose(self) -> ComposeResult:
        yield Static(self.source, id="tel-source")
        for key, label, _, _ in GPU_TRACES:
            with Horizontal(classes="trace", id=f"tr-{key}"):
                yield Label(label, id=f"lb-{key}")
                yield Sparkline([], id=f"sp-{key}")
                yield Static("N/A", classes="value", id=f"val-{key}")

    def add(self, s: Snapshot) -> None:
        if s.gpus:
            g = s.gpus[0]
            traces, obj = GPU_TRACES, g
            throttle = f"  throttle: {', '.join(g.throttling)}" if g.throttling else ""
            self.source = f"gpu{g.index} {g.name}{' — LOST' if g.lost else ''}{throttle}"
        elif s.cpu is not None:
            traces, obj = CPU_TRACES, s.cpu
            self.source = f"CPU ({len(s.cpu.per_core_pct)} cores) — {s.state}"
        else:
            self.query_one("#tel-source", Static).update(s.state)
            return
        self.query_one("#tel-source", Static).update(Text(self.source, style="bold" if s.gpus else "dim"))
        shown = {k for k, *_ in traces}
        for key, label, unit, read in traces:
            v = read(obj)
            self.query_one(f"#lb-{key}", Label).update(label)
            if v is not None:
                self.data[key].append(float(v))
                self.query_one(f"#sp-{key}", Sparkline).data = list(self.data[key])
            fmt = VALUE_FORMAT.get(key, "{:,.0f}")
            self.query_one(f"#val-{key}", Static).update("N/A" if v is None else f"{fmt.format(v)} {unit}")
        for key, *_ in GPU_TRACES:
            self.query_one(f"#tr-{key}").display = key in shown


class Live(Widget):
    """The Live tab: telemetry now; the measurement section is mounted by the app when probes are available."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("telemetry", classes="section")
            yield TelemetryPanel(id="telemetry")

    def on_telemetry(self, message: Telemetry) -> None:
        self.query_one(TelemetryPanel).add(message.snapshot)
