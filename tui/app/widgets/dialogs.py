"""Modal dialogs and the help screen (the keys, and what the numbers mean)."""


from __future__ import annotations


from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, ScreenResultType



HELP = """\
# rooftop

A roofline lab: where an op sits on this device's ceilings, what bounds it, what to do about it.

| key | does |
|---|---|
| `1`–`7` | Live · Roofline · What-if · Compare · History · LLM · Profile |
| `m` | measure this machine (quick plan) |
| `c` / `Esc` | cancel the running measurement (what was measured is kept) |
| `v` | Live: the next sweep's curve — GB/s vs working set, TFLOP/s vs n or M, FMA sweep vs R |
| `[` / `]` | What-if: halve / double M (or the batch) — watch the point cross the ridge; LLM: the batch |
| `,` / `.` | LLM: halve / double the context |
| `PgUp` / `PgDn` | LLM under 90 columns: scroll to the op table's end and the chart |
| `p` | What-if: pin the op to the Roofline tab, or unpin it; pins are kept in the store |
| `r` `d` `e` | History: rename, delete, export the selected run |
| `e` `E` | Roofline, LLM, Profile: export to History's folder (else the current one) — `e` the LLM step's report as HTML, elsewhere the chart as SVG; `E` the chart as SVG |
| `Tab` | move between fields; `Esc` leaves a text field |
| `?` | this help |
| `q` | quit |

**Op specs** (What-if): `gemm 1 8192 8192 bf16`, `gemv 8192 8192 fp16`,
`attn b=8 h=32 kv=8 d=128 t=8192 decode`, `ew n=1e9 fp32`, `fma 64 fp32`,
`norm 4096 4096 bf16`, `softmax 4096 4096`. Numbers: `8192`, `1e9`, `2^20`, `8k`.

Under 90 columns, What-if and History put their chart below the text,
or leave it out when the terminal is under 30 rows (LLM scrolls to it): the Roofline tab (`2`)
draws the What-if op, and a measured run's points when you pick its device.
Tables leave out their least needed columns rather than cut one in half.

Bytes and FLOPs are algorithmic (each array once; an FMA is 2 FLOP), so
T = max(W/F, Q/B) is a lower bound. Every ceiling says where it came from:
measured here, a published reference measurement, or a datasheet.
"""



class Dialog(ModalScreen[ScreenResultType]):
    """A modal screen that closes once: keys that come together (Esc and Enter in one read) may
    each ask it to close, and a second dismiss would pop the screen below it."""

    @property
    def closed(self) -> bool:
        """No longer the screen on top: dismissed already (or not shown yet)."""
        return not self.is_attached or self.app.screen is not self

    def dismiss(self, result: ScreenResultType | None = None) -> AwaitComplete:
        if self.closed:
            return AwaitComplete()  # closed already: this later key asks nothing
        return super().dismiss(result)



class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: 80%; border: round $accent; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown  # deferred: markdown-it (~40 ms), only when help is asked for

        with VerticalScroll():
            yield Markdown(HELP)
