"""The profile report at 80 columns: one line per row. Piped, or in an 80-column pane, op names wrapped mid-word
(`_cudnn_attenti` over `on_backward`) and shapes stacked down the row (an attention row of an H200 training step
took 14 lines). Now a row's name and shapes are cropped with "…", the whole text is in --json and --wide."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rooftop.models.program.workload import OpGroup
from rooftop.tui.cli import main
from rooftop.tui.render.profile import op_label

DATA = Path(__file__).parent / "data"
QWEN = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
REAL = DATA / "real-traces"
WIDTH = 80

# The H200 decode trace's op table at 80 columns, line by line: one line per op group, the names cropped with "…".
DECODE_AT_80 = """\
  share    time calls  op dtype shapes            I     achieved regime  of roof
  91.0%  141 ms        idle time
   2.8% 4.33 ms   112  mm bf16 8×3584 · 3584…  7.98    3520 GB/s memory    82.0%
   1.4% 2.18 ms    56  mm bf16 8×18944 · 189…  7.98    3497 GB/s memory    81.4%
   0.5%  761 µs   112  addmm bf16 512 · 8×35…  7.86   549.6 GB/s memory    12.8%
   0.4%  676 µs    56  mm bf16 8×3584 · 3584…  7.96    2138 GB/s memory    49.8%
   0.4%  623 µs    56  addmm bf16 3584 · 8×3…  7.96    2319 GB/s memory    54.0%
   0.4%  578 µs   114  mean fp32 8×1×3584      0.25   22.64 GB/s memory     0.5%
   0.3%  518 µs     2  mm bf16 8×3584 · 3584…  7.98    4216 GB/s memory    98.2%
   0.3%  391 µs    56  cat [8×4×1028×128, 8×…  no W    2413 GB/s memory    56.2%
   0.3%  390 µs    56  cat [8×4×1027×128, 8×…  no W    2416 GB/s memory    56.2%
   0.2%  328 µs   114  copy_ fp32 8×1×3584 ·…  no W   59.83 GB/s memory     1.4%
   0.2%  312 µs   114  mul bf16 3584 · 8×1×3… 0.235   44.58 GB/s memory     1.0%
   0.2%  309 µs    28  _cudnn_attention_forw…  6.95    1536 GB/s memory    35.8%
   0.2%  308 µs    28  _cudnn_attention_forw…  6.95    1544 GB/s memory    35.9%
   0.2%  256 µs   112  mul bf16 8×28×1×128 ·… 0.249   50.35 GB/s memory     1.2%
   0.1%  219 µs   112  mul bf16 8×4×1×128 · … 0.246   8.495 GB/s memory     0.2%
   0.1%  207 µs   114  mul fp32 8×1×3584 · 8… 0.125   126.6 GB/s memory     2.9%
   0.1%  159 µs   112  add bf16 8×1×3584 · 8… 0.167   121.3 GB/s memory     2.8%
 0.095%  146 µs    56  cat [8×28×1×64, 8×28×…  no W   44.02 GB/s memory     1.0%
 0.083%  128 µs    56  neg bf16 8×28×1×64      0.25   25.07 GB/s memory     0.6%
  0.08%  123 µs   114  pow fp32 8×1×3584      0.125   212.2 GB/s memory     4.9%
  0.01% 15.9 µs        overlap of streams
0.0021% 3.26 µs     4  memset 72.0 B                0.02206 GB/s dram   0.00051%
"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def block(out: str, head: str) -> list[str]:
    """The lines from the one starting with `head` to the next empty line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(head))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def label(op: dict[str, Any]) -> str:
    return op_label(OpGroup(op=op["op"], shapes=op["shapes"], dtype=op["dtype"], model="", path="", counting=""))


def by_share(groups: list[dict[str, Any]]) -> list[str]:
    """The op groups' labels in the report's order: by share of the span (each group's time alone)."""
    return [label(g) for g in sorted(groups, key=lambda g: -g["time_alone_s"])]


def one_line_each(rows: list[str], labels: list[str]) -> None:
    """Every row within WIDTH; the op groups' rows, in the table's order, each with its label whole or cropped
    with "…": one line each, never wrapped (the idle, overlap and copy rows aside)."""
    assert all(len(r) <= WIDTH for r in rows), [r for r in rows if len(r) > WIDTH]
    others = ("idle time", "overlap of streams", "memset", "memcpy")
    mine = [r for r in rows if not any(f"  {x}" in r for x in others)]
    assert len(mine) == len(labels)
    for row, text in zip(mine, labels):
        assert text in row or any(text[:n] + "…" in row for n in range(4, len(text))), (text, row)


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output piped with no COLUMNS, beside a 200-column terminal: Rich asked that terminal for the width."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=0: os.terminal_size((200, 50)))


def test_the_decode_report_piped_is_one_line_per_op_group_at_80_columns(piped: None,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["profile", "--trace", str(QWEN), "-d", "h200", "--no-save"], capsys)
    assert all(len(line) <= WIDTH for line in out.splitlines()), max(out.splitlines(), key=len)
    table = block(out, "share")
    assert table == DECODE_AT_80.splitlines()
    doc = json.loads(run(["profile", "--trace", str(QWEN), "-d", "h200", "--no-save", "--json"], capsys))
    top = doc["ops"][:20]  # --top's default
    assert len(table) == 1 + 2 + len(doc["transfers"]) + len(top)  # a header; idle, overlap, memset, op groups
    one_line_each(table[1:], by_share(top))


def write_training(path: Path) -> Path:
    """A training-like step on an H200: attention forward and backward with long names and many shapes, GEMMs,
    a layer norm backward, an optimizer's foreach over 300 tensors, kernels named as cuDNN names them, and two
    profiler steps (one with a long name)."""
    events: list[dict[str, Any]] = []
    bf16 = "c10::BFloat16"
    q, kv, lse = [8, 28, 4096, 128], [8, 4, 4096, 128], [8, 28, 4096, 1]
    ops = [
        ("aten::_cudnn_attention_backward", [q, q, kv, kv, q, lse, [], [], [2], [2], [], [], [], []],
         [bf16] * 5 + ["float"] + ["Scalar"] * 8,
         "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0", 7400),
        ("aten::_cudnn_attention_forward", [q, kv, kv, [], [], [], []], [bf16] * 3 + ["Scalar"] * 4,
         "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", 2900),
        ("aten::mm", [[32768, 3584], [3584, 18944]], [bf16] * 2,
         "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_NNT", 6300),
        ("aten::native_layer_norm_backward", [[8, 4096, 3584], [8, 4096, 3584], [3584], [8, 4096, 1],
                                              [8, 4096, 1], [3584], [3584], []],
         [bf16, bf16, "Scalar", "float", "float", bf16, bf16, "Scalar"],
         "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>"
         "(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, "
         "c10::BFloat16*, int)", 300),
        ("aten::_foreach_add_", [[[3584, 3584]] * 150 + [[3584]] * 150, [[3584, 3584]] * 150 + [[3584]] * 150, []],
         ["TensorList", "TensorList", "Scalar"],
         "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
         "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<c10::BFloat16, 2, 2, 0>"
         ", std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, "
         "at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<c10::BFloat16, 2, 2, 0>, std::plus<float>, "
         "float)", 3100),
    ]
    t, ext = 1000.0, 1
    for step in ("ProfilerStep#7", "ProfilerStep#8 (gradient accumulation micro-batch 3 of 4, rank 0 of 64)"):
        start = t
        for name, dims, types, kernel, dur in ops:
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": 40.0,
                           "args": {"External id": ext, "Input Dims": dims, "Input type": types}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t + 30, "dur": 8.0, "args": {"External id": ext, "correlation": ext}})
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t + 45, "dur": dur,
                           "args": {"External id": ext, "correlation": ext, "device": 0, "stream": 7}})
            t += 45 + dur + 20
            ext += 1
        events.append({"ph": "X", "cat": "user_annotation", "name": step, "pid": 1, "tid": 1, "ts": start,
                       "dur": t - start, "args": {}})
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320, "computeMajor": 9,
                                 "computeMinor": 0, "numSms": 132}], "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def training(tmp_path: Path) -> Path:
    return write_training(tmp_path / "train-step.json")


def test_a_training_step_is_one_line_per_row_in_every_table(training: Path, piped: None,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["profile", str(training), "-d", "h200", "--no-save"], capsys)
    lines = out.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    doc = json.loads(run(["profile", str(training), "-d", "h200", "--no-save", "--json"], capsys))
    ops = block(out, "share")
    assert len(ops) == 1 + 1 + len(doc["ops"])  # the header, idle time, then one line per op group
    one_line_each(ops[1:], by_share(doc["ops"]))
    (attention,) = [r for r in ops if "_cudnn_attention_backw" in r]
    assert "_cudnn_attention_backward bf16 8×28×4096×128 · 8×28×4096×128 · 8×4×4096×128" not in attention
    assert "…" in attention and "_cudnn_attenti\n" not in out and not any(x.strip() == "on_backward" for x in lines)
    causes = block(out, "idle time by cause")  # the totals, one line per cause, the legend
    assert causes[1 + len(doc["idle_causes"])].startswith("host wait: the CPU issued")
    assert all(len(c) <= WIDTH and c.endswith("gaps)") or c.endswith("gap)") for c in causes[1:1 + len(doc["idle_causes"])])
    kernels = block(out, "top kernels")
    assert len(kernels) == 1 + min(5, len(doc["top_kernels"]))
    assert sum("cudnn_generated_fort_native_sdpa_sm90" in k and "…" in k for k in kernels) == 2, kernels
    steps = block(out, "per step:")
    assert len(steps) == 2 + 2  # the title, the header, one line per step
    assert steps[-1].startswith("  ProfilerStep#8 (gradient") and "…" in steps[-1] and steps[-1].endswith(" µs")


def test_the_json_holds_every_name_and_shape_whole(training: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(run(["profile", str(training), "-d", "h200", "--no-save", "--json"], capsys))
    trace = json.loads(training.read_text())["traceEvents"]
    recorded = {e["name"]: e["args"]["Input Dims"] for e in trace if e["cat"] == "cpu_op"}
    assert {g["op"]: g["shapes"] for g in doc["ops"]} == recorded  # every op, every shape, as recorded
    names = {e["name"] for e in trace if e["cat"] == "kernel"}
    assert {k["name"] for k in doc["top_kernels"]} <= names
    assert {s["name"] for s in doc["steps"]} == {e["name"] for e in trace if e["cat"] == "user_annotation"}


def test_wide_lays_every_row_out_whole_on_its_line(training: Path, piped: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["profile", str(training), "-d", "h200", "--no-save", "--wide"], capsys)
    doc = json.loads(run(["profile", str(training), "-d", "h200", "--no-save", "--json"], capsys))
    ops = block(out, "share")
    assert len(ops) == 2 + len(doc["ops"])
    for g in doc["ops"]:
        (row,) = [r for r in ops if label(g) in r]  # whole, on one line (the 300 tensors: counted, see --json)
    assert "_cudnn_attention_backward bf16 8×28×4096×128 · 8×28×4096×128 · 8×4×4096×128" in out
    assert max(len(r) for r in ops) > WIDTH and "…" not in "".join(r for r in ops if "foreach" not in r)
    assert any("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0" in k
               for k in block(out, "top kernels"))
    assert any("ProfilerStep#8 (gradient accumulation micro-batch 3 of 4, rank 0 of 64)" in s
               for s in block(out, "per step:"))
    prose = [line for line in out.splitlines() if line.startswith(("span ", "every op", "MFU"))]
    assert prose and all(len(line) <= WIDTH for line in prose)  # the prose still wraps at the width


def test_show_of_a_kept_profile_crops_and_widens_as_profile_does(training: Path, tmp_path: Path, piped: None,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "k.db")
    kept = run(["profile", str(training), "-d", "h200", "--db", db], capsys)
    run_id = json.loads(run(["runs", "--json", "--db", db], capsys))[0]["id"]
    shown = run(["show", run_id, "--db", db], capsys)
    assert block(shown, "share") == block(kept, "share")
    assert all(len(line) <= WIDTH for line in shown.splitlines())
    wide = run(["show", run_id, "--db", db, "--wide"], capsys)
    assert "_cudnn_attention_backward bf16 8×28×4096×128 · 8×28×4096×128 · 8×4×4096×128" in wide
    assert block(wide, "share") == block(run(["profile", str(training), "-d", "h200", "--no-save", "--wide"],
                                               capsys), "share")


def test_compare_of_two_kept_profiles_is_one_line_per_op_group(training: Path, tmp_path: Path, piped: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "c.db")
    run(["profile", str(training), "-d", "h200", "--db", db], capsys)
    run(["profile", str(training), "-d", "h100", "--db", db], capsys)
    a, b = (r["id"] for r in json.loads(run(["runs", "--json", "--db", db], capsys)))
    out = run(["profile", "--compare", a, b, "--db", db], capsys)
    table = block(out, "op dtype shapes")
    doc = json.loads(run(["profile", "--compare", a, b, "--db", db, "--json"], capsys))
    assert len(table) == 1 + len(doc["ops"])
    one_line_each(table[1:], [label(d) for d in doc["ops"]])
    wide = block(run(["profile", "--compare", a, b, "--db", db, "--wide"], capsys), "op dtype shapes")
    assert [r.split("  ")[0] for r in wide[1:]] == [label(d) for d in doc["ops"]]  # each whole, on its line


def test_a_job_reports_straggler_and_collectives_one_line_each(piped: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    ranks = [str(REAL / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    out = run(["profile", *ranks, "--no-save"], capsys)
    lines = out.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    straggler = block(out, "straggler:")
    assert [x for x in straggler if x.startswith("  +")] and all(
        x.endswith("…") for x in straggler if x.startswith("  +"))  # each group: its op cropped, not wrapped
    doc = json.loads(run(["profile", *ranks, "--no-save", "--json"], capsys))
    collectives = block(out, "collective ")
    assert collectives[1 + len(doc["collectives"])].startswith("link: ")  # a header, a line per collective


def collective(op: str) -> dict[str, Any]:
    return {"op": op, "bytes": 123456789, "group_size": 128, "calls": 12345, "time_s": 0.2113, "wait_s": 0.00121,
            "algbw": 3.18e8, "busbw": 3.15e8, "link": "nvlink", "fraction_of_link": 0.00123, "expected_s": 0.123}


def render(thing: Any, width: int = WIDTH) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, markup=False).print(thing, crop=width == WIDTH)
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def test_every_column_of_the_collectives_fits_80_or_is_said_left_out() -> None:
    """With a link roof every column has figures: 92 columns wide, the last three (link, of link, α-β) were cut
    off at 80, and a figure mid-way."""
    from rooftop.tui.render.job import collectives_table

    job = {"collectives": [collective("reduce_scatter"), collective("allreduce")]}
    lines = render(collectives_table(job))
    assert lines[0].split() == ["collective", "size", "calls", "time", "wait", "algbw", "busbw", "link", "of",
                                "link", "α-β"]
    assert lines[1].split() == ["reduce_scatter", "118", "MiB", "12345", "211", "ms", "1.21", "ms", "0.318",
                                "0.315", "nvlink", "0.1%", "123", "ms"]
    assert lines[3] == "ranks left out at 80 columns (--wide shows it)"
    wide = render(collectives_table(job, wide=True), 200)
    assert "ranks" in wide[0] and len(wide) == 3


def test_the_ncu_table_keeps_its_figures_whole_at_80(piped: None, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["profile", "--ncu", str(DATA / "ncu-raw.csv"), "-d", "h200"], capsys)
    table = block(out, "kernel")
    assert all(len(r) <= WIDTH for r in table)
    assert table[0].split() == ["kernel", "time", "DRAM", "L2→SM", "tensor", "W", "I", "dram", "DRAM", "B/s", "roof"]
    doc = json.loads(run(["profile", "--ncu", str(DATA / "ncu-raw.csv"), "-d", "h200", "--json"], capsys))
    assert len(table) == 1 + len(doc["kernels"])


def test_an_optimizers_5000_tensors_are_one_line_and_counted_when_wide(tmp_path: Path, piped: None,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(gzip.decompress((REAL / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes()))
    op = next(e for e in doc["traceEvents"] if e.get("name") == "aten::_foreach_add_")
    op["args"]["Input Dims"] = [[[64, 64]] * 5000, [[64, 64]] * 5000]
    p = tmp_path / "foreach.json"
    p.write_text(json.dumps(doc))
    (row,) = [x for x in run(["profile", str(p), "--no-save", "-d", "mi210"], capsys).splitlines()
              if "_foreach_add_ fp32" in x]
    assert len(row) <= WIDTH and "…" in row
    (row,) = [x for x in run(["profile", str(p), "--no-save", "-d", "mi210", "--wide"], capsys).splitlines()
              if "_foreach_add_ fp32" in x]
    shown = row.count("64×64")
    assert f"… {10_000 - shown:,} more shapes" in row and shown < 20


def test_piped_output_is_laid_out_at_80_whatever_the_terminal_beside_it(piped: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`rooftop profile … > report.txt` from a 200-column pane wrote 200-column lines: Rich took the width of the
    terminal on stdin. A pipe has no width: 80, unless COLUMNS says otherwise."""
    from rooftop.tui.render.layout import make_console

    assert make_console().width == 80
    monkeypatch.setenv("COLUMNS", "132")
    assert make_console().width == 132
