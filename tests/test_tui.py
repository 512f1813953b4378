"""The Textual app driven by Pilot, as a user drives it: keys, typing, what each tab shows."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Static, TabbedContent

from fake_nvml import FakeNVML
from rooftop.probes.telemetry import Sampler
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.render.chart import point_markers
from rooftop.tui.app.panes.compare import Compare
from rooftop.tui.app.panes.live import TelemetryPanel
from rooftop.tui.app.panes.roofline import Roofline
from rooftop.tui.app.panes.whatif import WhatIf
from rooftop.tui.app.widgets import HelpScreen, RooflinePlot

SIZE = (110, 36)


def app(**kw):
    """The app on a fixed device, no telemetry, and a store of its own (empty)."""
    import tempfile
    from pathlib import Path

    kw.setdefault("device", "h100")
    kw.setdefault("sampler", None)
    kw.setdefault("db_path", Path(tempfile.mkdtemp(prefix="rooftop-tui-")) / "r.db")
    return create_app(AppConfig(**kw))


def text_of(widget: Static) -> str:
    return str(widget.render())


async def test_number_keys_switch_tabs_and_help_opens() -> None:
    a = app()
    async with a.run_test(size=SIZE) as pilot:
        tabs = a.query_one(TabbedContent)
        assert tabs.active == "roofline"
        for key, tab in (("3", "whatif"), ("4", "compare"), ("1", "live"), ("2", "roofline")):
            a.set_focus(None)
            await pilot.press(key)
            assert tabs.active == tab
        await pilot.press("question_mark")
        assert isinstance(a.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(a.screen, HelpScreen)


async def test_escape_leaves_a_text_field_so_keys_work_again() -> None:
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        a.query_one("#spec", Input).focus()
        await pilot.press("1")  # typed into the field
        assert a.query_one(TabbedContent).active == "whatif"
        await pilot.press("escape", "1")
        assert a.query_one(TabbedContent).active == "live"


async def test_whatif_opens_with_a_batch_one_decode_gemv() -> None:
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        w = a.query_one(WhatIf)
        assert w.analysis is not None
        assert w.analysis.op.describe() == "GEMV 1×8192×8192 bf16"
        shown = text_of(a.query_one("#analysis", Static))
        assert "memory-bound" in shown and "T ≥ 43.5 µs" in shown
        assert "compute-bound from m ≈ 278" in text_of(a.query_one("#batch-bar", Static))


async def test_typing_a_spec_updates_the_analysis_and_errors_are_inline() -> None:
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        spec = a.query_one("#spec", Input)
        spec.focus()
        spec.value = ""
        await pilot.press(*"gemm 4096 4096 4096 fp8")
        await pilot.pause()
        w = a.query_one(WhatIf)
        assert w.analysis is not None and w.analysis.path == "fp8-tc"
        assert "compute-bound" in text_of(a.query_one("#analysis", Static))
        assert a.query_one("#f-m", Input).value == "4096"  # the form follows the spec
        await pilot.press("backspace", "backspace", "backspace", *"fp99")
        await pilot.pause()
        err = text_of(a.query_one("#spec-error", Static))
        assert "'fp99'" in err and "bf16" in err
        assert w.analysis is None
        # a device without the roof: inline, names what it has
        spec.value = "gemm 1 8192 8192 fp8"
        a.query_one("#device").value = "v100-32"
        await pilot.pause()
        shown = text_of(a.query_one("#spec-error", Static))
        assert "v100-32 has no fp8-tc roof" in shown
        assert "devices with one: " in shown and "h100" in shown.split("devices with one: ")[1]  # where to ask


async def test_changing_the_op_kind_rebuilds_the_form() -> None:
    """Typing another kind of op (and back) swaps the form's fields without a crash."""
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        w = a.query_one(WhatIf)
        for spec, field, value in (("ew 5", "#f-n", "5"), ("norm 1 2", "#f-cols", "2"), ("softmax 3 4", "#f-rows", "3"),
                                   ("gemm 8 16 32", "#f-k", "32"), ("ew 7", "#f-n", "7")):
            w.set_spec(spec)
            await pilot.pause()
            await pilot.pause()
            assert a.query_one(field, Input).value == value
        assert w.analysis.op.kind == "ew"


async def test_form_edit_rewrites_the_spec() -> None:
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        field = a.query_one("#f-m", Input)
        field.focus()
        await pilot.press("backspace", *"64")
        await pilot.pause()
        assert a.query_one("#spec", Input).value.startswith("gemm m=64 n=8192 k=8192")
        assert a.query_one(WhatIf).analysis.op.m == 64


async def test_batch_keys_walk_the_point_across_the_ridge() -> None:
    """Seed 001's slider: doubling M moves a decode GEMV right until it turns compute-bound."""
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        w = a.query_one(WhatIf)
        a.query_one("#whatif-plot", RooflinePlot).focus()
        regimes = []
        for _ in range(10):
            await pilot.press("right_square_bracket")
            await pilot.pause()
            regimes.append((w.analysis.op.m, w.analysis.regime))
        assert regimes[0] == (2, "memory")
        assert ("memory" if 256 < 278 else "compute") == dict(regimes)[256]
        assert dict(regimes)[512] == "compute"
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert w.analysis.op.m == 512


async def test_pinned_op_appears_on_the_roofline() -> None:
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        a.query_one("#whatif-plot", RooflinePlot).focus()
        await pilot.press("p")
        a.query_one(WhatIf).set_spec("attn b=8 h=32 d=128 t=8192 decode")
        await pilot.pause()
        await pilot.press("p")
        a.set_focus(None)
        await pilot.press("2")
        await pilot.pause()
        labels = [s.label for s in a.query_one("#rl-plot", RooflinePlot).series if s.kind == "point"]
        assert "GEMV 1×8192×8192 bf16" in labels
        assert any(label.startswith("decode attention b=8") for label in labels)
        # the legend below the chart marks each op as the chart does
        from tui_helpers import screen_lines

        series = a.query_one("#rl-plot", RooflinePlot).series
        legend = "\n".join(screen_lines(a))
        assert all(f"{point_markers(series)[lb]} {lb}"[:30] in legend for lb in labels)
        assert len({point_markers(series)[lb] for lb in labels}) == len(labels)


async def test_roofline_switches_device_and_overlays() -> None:
    a = app()
    async with a.run_test(size=SIZE) as pilot:
        r = a.query_one(Roofline)
        a.query_one("#rl-overlay").value = "h200"
        await pilot.pause()
        labels = [s.label for s in a.query_one("#rl-plot", RooflinePlot).series]
        assert any(lb.startswith("h100 bf16-tc") for lb in labels)
        assert any(lb.startswith("h200 bf16-tc") for lb in labels)
        a.query_one("#rl-device").value = "b300"
        await pilot.pause()
        assert r.device_id == "b300"
        assert any(s.label.startswith("b300 fp4-tc") is False for s in a.query_one("#rl-plot", RooflinePlot).series)


async def test_compare_shows_roofs_crossover_and_the_faster_device() -> None:
    a = app(initial_tab="compare")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = a.query_one("#cmp-table", DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        fp16 = next(r for r in rows if r[0] == "F fp16-tc TF/s")
        assert fp16[5] == "245"  # seed 000 §3: H100 and H200 cross at I = 245
        assert fp16[6] == "h200 / h100"
        op_line = text_of(a.query_one("#cmp-op", Static))
        assert "h200 is faster" in op_line  # the default what-if op is memory-bound
        a.query_one(Compare).show_op(None)
        assert "type an op" in text_of(a.query_one("#cmp-op", Static))


async def test_live_telemetry_from_a_fake_gpu() -> None:
    nv = FakeNVML()
    a = app(initial_tab="live", sampler=lambda: Sampler(interval=0.05, nvml=nv, cpu=False))
    async with a.run_test(size=SIZE) as pilot:
        for _ in range(40):
            await pilot.pause(0.05)
            if len(a.query_one(TelemetryPanel).data["power"]) >= 3:
                break
        panel = a.query_one(TelemetryPanel)
        assert list(panel.data["power"])[:3] == [650.0, 650.0, 650.0]
        assert "NVIDIA H200" in panel.source and "power cap" in panel.source
        assert text_of(a.query_one("#val-temp", Static)) == "71 °C"


async def test_live_telemetry_falls_back_to_the_cpu() -> None:
    a = app(initial_tab="live", sampler=lambda: Sampler(interval=0.05, nvml=FakeNVML(init_error=RuntimeError("no NVML"))))
    async with a.run_test(size=SIZE) as pilot:
        for _ in range(40):
            await pilot.pause(0.05)
            if a.query_one(TelemetryPanel).data["util"]:
                break
        panel = a.query_one(TelemetryPanel)
        assert panel.source.startswith("CPU (") and "NVML not available" in panel.source
        assert not a.query_one("#tr-power").display  # no power trace for a CPU


@pytest.mark.parametrize("tab", ["live", "roofline", "whatif", "compare", "history", "llm", "profile"])
def test_snapshots(tab: str, snap_compare) -> None:
    assert snap_compare(app(initial_tab=tab), terminal_size=(100, 32))


async def test_llm_tab_moves_with_batch_and_context() -> None:
    """Issue 7's screen: Qwen2.5-7B decode on H100 — 4.59 ms bound at batch 1, I ≈ batch for the linear layers."""
    from rooftop.tui.app.panes.llm import Llm

    a = app(initial_tab="llm")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        pane = a.query_one(Llm)
        assert pane.step is not None
        assert pane.step.lower_bound_s == pytest.approx(4.59e-3, rel=0.01)
        assert "≤ 218 tokens/s" in text_of(a.query_one("#llm-summary", Static))
        a.query_one("#llm-plot", RooflinePlot).focus()
        for _ in range(3):
            await pilot.press("right_square_bracket")
        await pilot.pause()
        assert pane.step.phase.batch == 8
        q = next(x for lo, x in pane.step.ops if lo.name == "q")
        assert q.intensity == pytest.approx(8, rel=0.03)
        await pilot.press("full_stop")
        await pilot.pause()
        assert pane.step.phase.kv_len == 256
        batch = a.query_one("#llm-batch", Input)
        batch.value = "0"
        await pilot.pause()
        assert "at least 1" in text_of(a.query_one("#llm-error", Static))


async def test_pins_are_kept_in_the_store_and_p_again_unpins(tmp_path) -> None:
    from rooftop.store.runs import Store

    db = tmp_path / "r.db"
    first = app(initial_tab="whatif", db_path=db)
    async with first.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first.query_one(WhatIf).set_spec("gemm 4096 4096 4096 fp16")
        await pilot.pause()
        first.query_one("#whatif-plot", RooflinePlot).focus()
        await pilot.press("p")
        await pilot.pause()
    with Store.open(db) as store:
        assert [o["spec"] for o in store.saved_ops()] == ["gemm m=4096 n=4096 k=4096 fp16"]
    again = app(initial_tab="roofline", db_path=db)  # a new session: the pin is back on the Roofline
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        labels = [s.label for s in again.query_one("#rl-plot", RooflinePlot).series if s.kind == "point"]
        assert "GEMM 4096×4096×4096 fp16" in labels
        await pilot.press("3")
        await pilot.pause()
        again.query_one(WhatIf).set_spec("gemm 4096 4096 4096 fp16")
        await pilot.pause()
        again.query_one("#whatif-plot", RooflinePlot).focus()
        await pilot.press("p")  # pinned already: unpins
        await pilot.pause()
        assert again.pinned == []
    with Store.open(db) as store:
        assert store.saved_ops() == []


async def test_number_keys_leave_any_widget_and_the_tabs_keys_work_at_once() -> None:
    a = app(initial_tab="roofline")
    async with a.run_test(size=(80, 24)) as pilot:
        tabs = a.query_one(TabbedContent)
        a.query_one("#rl-device").focus()  # a dropdown kept the focus: it used to pull its tab back
        await pilot.pause()
        await pilot.press("3")
        await pilot.pause()
        assert tabs.active == "whatif"
        await pilot.press("right_square_bracket", "p")  # no Tab needed first
        await pilot.pause()
        assert a.query_one(WhatIf).analysis.op.m == 2 and len(a.pinned) == 1
        a.query_one("#kind").focus()
        await pilot.press("4")
        await pilot.pause()
        assert tabs.active == "compare"
        a.query_one("#cmp-a").focus()
        await pilot.press("6")
        await pilot.pause()
        assert tabs.active == "llm"
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert a.query_one("#llm-batch", Input).value == "2"
        await pilot.press("2")
        await pilot.pause()
        assert tabs.active == "roofline"


async def test_a_saved_attention_pin_unpins_and_a_roofless_pin_is_listed(tmp_path) -> None:
    from rooftop.models.spec import parse_spec
    from rooftop.store.runs import Store

    db = tmp_path / "r.db"
    with Store.open(db) as store:
        for spec in ("attn b=1 h=8 t=512 fp16", "gemm 1 8192 8192 fp8"):
            saved = parse_spec(spec).spec()  # as the app saves it
            store.save_op(saved, saved, ["h100"])
    a = app(initial_tab="roofline", device="v100-16", db_path=db)
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        legend = text_of(a.query_one("#rl-legend", Static))
        assert "GEMV 1×8192×8192 fp8: no roof for it on v100-16" in legend  # pinned, not silently gone
        await pilot.press("3")
        a.query_one(WhatIf).set_spec("attn b=1 h=8 t=512 fp16")  # typed again: the same pin
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        assert [op.kind for op in a.pinned] == ["gemm"]
    with Store.open(db) as store:
        assert [o["spec"] for o in store.saved_ops()] == [parse_spec("gemm 1 8192 8192 fp8").spec()]


async def test_a_charts_legend_is_below_it_not_over_the_slopes() -> None:
    from tui_helpers import screen_lines

    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        lines = screen_lines(a)
        axis = max(i for i, line in enumerate(lines) if "I, FLOP/byte (log-log)" in line)
        top = min(i for i, line in enumerate(lines) if "┌" in line)
        col = lines[top].index("┌")  # the chart's frame: the analysis text is to its left
        chart = "\n".join(line[col:] for line in lines[top:axis])
        assert "GB/s" not in chart and "GEMV" not in chart
        below = "\n".join(line[col - 6:] for line in lines[axis + 1:])
        assert "── h100 dram 3085 GB/s" in below and "★ GEMV 1×8192×8192 bf16" in below  # an op: not a family glyph


async def test_whatif_takes_a_collective_on_the_spec_line() -> None:
    """A collective has no form fields: typed on the spec line it is analysed on its link, without a crash."""
    a = app(initial_tab="whatif")
    async with a.run_test(size=SIZE) as pilot:
        await pilot.pause()
        a.query_one("#device").value = "h100-sxm-ds"
        w = a.query_one(WhatIf)
        w.set_spec("allreduce n=16M bf16 world=8 level=nvlink")
        await pilot.pause()
        await pilot.pause()
        assert w.analysis is not None and w.analysis.regime == "comm"
        shown = text_of(a.query_one("#analysis", Static))
        assert "comm-bound" in shown and "B 450.0 GB/s" in shown
        w.set_spec("allreduce n=16M bf16 world=8 level=net")  # a link the profile lacks: inline, names what it has
        await pilot.pause()
        assert "no net bandwidth; it has: dram, nvlink, pcie" in text_of(a.query_one("#spec-error", Static))
        w.set_spec("ew 7")  # and back to a form op
        await pilot.pause()
        await pilot.pause()
        assert a.query_one("#f-n", Input).value == "7"
