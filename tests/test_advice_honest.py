"""Advice a user can act on: weight-only quantisation with its numbers, fp4 where the device has it, fp8
GEMMs that write bf16, no internal document cited; CPU profiles say their thread count."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rooftop.models.analysis import analyze
from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.spec import SpecError, parse_spec
from rooftop.tui.cli import main

H100 = lookup_device("h100")
B300 = lookup_device("b300")


# -- the op language: weight and activation dtypes ---------------------------------------------------------


def test_int4_weights_count_at_half_a_byte_plus_a_scale_per_128() -> None:
    op = parse_spec("gemm 1 8192 8192 bf16 wdtype=int4")
    c = op.cost()
    kn = 8192 * 8192
    assert c.bytes == 2 * 8192 + kn * 0.5 + kn / 128 * 2 + 2 * 8192  # X bf16, A int4, scales fp16, Y bf16
    assert c.path == "bf16-tc"  # the activations' tensor path
    assert c.flops == 2 * kn
    assert parse_spec(op.spec()) == op and "int4 weights" in op.describe()
    plain = parse_spec("gemv 8192 8192 bf16")
    assert plain.cost().bytes / c.bytes == pytest.approx(3.88, abs=0.01)  # ~×4 fewer bytes, scales included
    assert parse_spec("gemv 8192 8192 bf16 wdtype=bf16") == plain  # the same dtype is the plain GEMM
    assert parse_spec("gemm 1 4096 4096 bf16 wdtype=fp8").cost().bytes == 2 * 4096 + 4096 * 4096 + 2 * 4096


def test_a_bad_weight_dtype_names_the_choices() -> None:
    with pytest.raises(SpecError, match=r"wdtype 'int3' is not allowed; choose one of: .*int4"):
        parse_spec("gemm 1 8192 8192 bf16 wdtype=int3")
    with pytest.raises(SpecError, match="cannot read 'int4'"):  # a weight-only format is not an activation dtype
        parse_spec("gemm 1 8192 8192 int4")


def test_fp8_and_fp4_gemms_write_bf16_unless_told() -> None:
    fp8 = parse_spec("gemm 4096 4096 4096 fp8")
    assert fp8.out_dtype == "bf16"
    assert dict(fp8.cost().terms)["Y (M×N, bf16)"] == 2 * 4096 * 4096  # the report names the output dtype
    assert "Y (M×N)" in dict(parse_spec("gemm 4096 4096 4096 fp8 out=fp8").cost().terms)
    assert parse_spec("gemm 4096 4096 4096 fp8 out=fp8").cost().bytes == 3 * 4096 * 4096
    assert parse_spec("gemm 64 64 64 fp4").out_dtype == "bf16"
    assert parse_spec("gemm 64 64 64 bf16").out_dtype == "bf16"


# -- advice ------------------------------------------------------------------------------------------------


def test_a_memory_bound_gemv_is_told_about_weight_only_quantisation_with_numbers() -> None:
    a = analyze(parse_spec("gemv 8192 8192 bf16"), H100)
    line = next(x for x in a.advice if x.startswith("weight-only quantisation"))
    assert "int4 weights" in line and "bf16 activations" in line and "×3.9 fewer bytes" in line
    assert "43.5 µs → 11.2 µs" in line  # 128 MiB and 33 MiB at 3085 GB/s
    assert not any("fp4" in x for x in a.advice)  # the H100 has no fp4 roof
    quantised = analyze(parse_spec("gemv 8192 8192 bf16 wdtype=int4"), H100)
    assert not any(x.startswith(("weight-only", "lower precision")) for x in quantised.advice)
    m_star = next(x for x in quantised.advice if x.startswith("batch more rows"))
    m = int(re.search(r"M ≈ (\d+)", m_star).group(1))
    below, at = (analyze(parse_spec(f"gemm {v} 8192 8192 bf16 wdtype=int4"), H100) for v in (m - 1, m))
    assert below.regime == "memory" and at.regime == "compute"  # M* counts the int4 weights' bytes


def test_b300s_fp4_roof_is_suggested_where_it_helps() -> None:
    a = analyze(parse_spec("gemv 8192 8192 bf16"), B300)
    line = next(x for x in a.advice if x.startswith("fp4 on b300"))
    assert "NVFP4" in line and "fp4-tc" in line and f"{B300.F('fp4-tc') / 1e12:.0f} TFLOP/s" in line
    big = analyze(parse_spec("gemm 8192 8192 8192 bf16"), B300)
    assert any("fp4-tc" in x for x in big.advice)  # compute-bound: the higher roof


def _every_user_facing_text() -> str:
    """Advice, warnings and notes of many ops on every device, and the commands' help and reports."""
    from rooftop.models.analysis import analyze as an

    specs = ["gemv 8192 8192 bf16", "gemm 2 8192 8192 bf16", "gemm 8 4096 4096 fp64", "gemm 64 64 64 bf16",
             "attn b=8 h=32 kv=8 d=128 t=8192 decode", "attn b=1 h=32 d=128 t=4096 naive", "ew 1e9 fp32",
             "norm 4096 4096 bf16", "softmax 4096 4096 bf16", "fma 4 fp32", "gemm 4096 4096 4096 fp32",
             "gemm 4096 4095 4096 bf16"]
    out = []
    for dev in catalog().values():
        for spec in specs:
            try:
                a = an(parse_spec(spec), dev, 1e-6)
            except LookupError:
                continue
            out += [*a.advice, *a.warnings, a.launch_note(), a.cost.counting, json.dumps(a.to_dict())]
    return "\n".join(out)


def test_no_user_facing_text_cites_an_internal_document(capsys: pytest.CaptureFixture[str]) -> None:
    text = [_every_user_facing_text()]
    for argv in (["devices"], ["devices", "h100", "--json"], ["llm", "qwen2.5-7b", "-d", "h100"],
                 ["llm", "mixtral-8x7b", "-d", "b300", "--parts", "a=1,b=2", "--speedup", "a=2"],
                 ["compare", "h100", "h200"], ["op", "gemv 8192 8192 bf16", "-d", "h100"]):
        assert main(argv) == 0
        text.append(capsys.readouterr().out)
    for argv in (["llm", "--help"], ["compare", "--help"], ["op", "--help"], ["devices", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text.append(capsys.readouterr().out)
    found = re.findall(r".{0,40}\bseed \d.{0,20}", "\n".join(text), flags=re.IGNORECASE)
    assert not found, found[:5]


# -- CPU profiles: the thread count ------------------------------------------------------------------------


def _cpu(id_: str, threads: int, gbs: float) -> DeviceProfile:
    return DeviceProfile(id_, "AMD EPYC", "measured", {"dram": Ceiling(gbs * 1e9, "measured", "triad:268435452")},
                         {"fp32-fma": Ceiling(threads * 50e9, "measured", "fma:fp32:reps=64:1048576"),
                          "fp32-matmul": Ceiling(threads * 80e9, "measured", "512x512x512")},
                         kind="cpu", sm_count=threads)


def _printed(renderable) -> str:
    from rich.console import Console

    console = Console(width=100, record=True)
    console.print(renderable)
    return " ".join(console.export_text().split())


def test_op_output_on_a_cpu_profile_names_its_threads() -> None:
    from rooftop.tui.render.report import analysis_table

    text = _printed(analysis_table([analyze(parse_spec("gemm 512 512 512 fp32"), _cpu("local", 2, 20))]))
    assert "local is a CPU profile measured with 2 threads" in text
    assert "measured with" not in _printed(analysis_table([analyze(parse_spec("gemm 512 512 512 fp32"), H100)]))


def test_compare_notes_cpu_profiles_measured_with_different_threads() -> None:
    from rooftop.models.compare import thread_note
    from rooftop.tui.render.report import compare_tables

    one, two = _cpu("local", 1, 20), _cpu("run-a", 2, 20)
    note = thread_note([one, two])
    assert note and "local 1" in note and "run-a 2" in note and "--threads" in note
    assert thread_note([one, _cpu("run-b", 1, 21)]) is None and thread_note([one, H100]) is None
    assert "different thread counts" in _printed(compare_tables([one, two], []))
    assert "different thread counts" not in _printed(compare_tables([one, _cpu("run-b", 1, 21)], []))


def test_the_app_and_the_cli_give_one_note_for_different_thread_counts() -> None:
    # The Roofline tab's legend (and the Compare tab) said it in words of their own, "not like for like".
    from rooftop.models.compare import thread_note
    from rooftop.tui.app.panes.roofline import side_legend

    one, two = _cpu("local", 1, 20), _cpu("run-a", 2, 20)
    legend = side_legend([], [one, two], [], "local").plain
    assert f"! {thread_note([one, two])}\n" in legend and "like for like" not in legend
    assert "!" not in side_legend([], [one, _cpu("run-b", 1, 21)], [], "local").plain


def test_a_cpu_profile_has_one_thread_count_rule() -> None:
    from rooftop.tui.render.report import device_detail

    assert _cpu("a", 4, 20).threads == 4 and _cpu("a", 0, 20).threads is None and H100.threads is None
    read = DeviceProfile.from_dict({**_cpu("a", 4, 20).to_dict(), "sm_count": 4.0})  # a file may write 4 as 4.0
    assert read.threads == 4 and isinstance(read.threads, int)
    assert "measured with 4 threads" in _printed(device_detail(read))


def test_the_measure_report_says_how_many_threads() -> None:
    from rooftop.models.calibrate import Calibration
    from rooftop.tui.render.measure_report import ceilings_table

    cal = Calibration(profile=_cpu("local", 3, 20), unstable=(), skipped=(), above_roof=(), notes=())
    assert "ceilings of AMD EPYC (measured with 3 threads)" in _printed(ceilings_table(cal))


def test_the_docs_cite_no_internal_document() -> None:
    """README.md and docs/ are read by users: they cite the public source, not a path of the development box."""
    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"\bseed \d|DESIGN\.md|METHODS\.md|shared/reference|\bissue \d", re.IGNORECASE)
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert not pattern.search(line), f"{doc.name}:{n}: {line}"


def test_a_time_below_the_launch_floor_it_is_bound_by_is_flagged() -> None:
    """`gemm 64 64 64 -d h100 --measured-ms 0.002` said T ≥ 4.50 µs (launch) beside a 2 µs measurement, with
    no word; and called 2 µs 'within two launches: mostly launch overhead'."""
    fast = analyze(parse_spec("gemm 64 64 64"), lookup_device("h100"), 2e-6)
    assert fast.launch_binds and any(w.startswith("faster than T ≥ 4.50 µs") for w in fast.warnings), fast.warnings
    assert not any(w.startswith("launch-bound") for w in fast.warnings)
    slow = analyze(parse_spec("gemm 64 64 64"), lookup_device("h100"), 6e-6)
    assert not any(w.startswith("faster than") for w in slow.warnings)
    assert any(w.startswith("launch-bound") for w in slow.warnings)


def test_the_above_roof_threshold_has_one_home() -> None:
    # It was written as 1.10 in calibrate, in advice and (as ABOVE_BOUND) in llm: three homes to keep in step.
    from rooftop.models import advice, calibrate, roofline
    from rooftop.models.llm import step as llm

    assert advice.ABOVE_ROOF is roofline.ABOVE_ROOF and calibrate.ABOVE_ROOF is roofline.ABOVE_ROOF
    assert not hasattr(llm, "ABOVE_BOUND")
