"""Nsight Compute exports as users bring them: large, with a runaway field, with counters no kernel has."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from rooftop.models.ncu import FIELD_LIMIT, TIME, NcuError, read_ncu

NCU = Path(__file__).parent / "data" / "ncu-raw.csv"


def rows() -> tuple[list[list[str]], int]:
    """The real export's rows and the index of its header row."""
    rs = list(csv.reader(io.StringIO(NCU.read_text())))
    return rs, next(i for i, r in enumerate(rs) if r and r[0] == "ID")


def written(rs: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rs)
    return out.getvalue()


def with_cell(column: str, value: str, row: int = 0) -> str:
    rs, head = rows()
    rs[head + 2 + row][rs[head].index(column)] = value
    return written(rs)


def rooftop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True)


def test_a_field_over_128_kib_is_read_and_one_over_the_limit_is_one_line(tmp_path: Path) -> None:
    long_name = "void kernel<" + "x" * (200 * 1024) + ">()"  # csv's default limit is 128 KiB
    export = read_ncu(io.StringIO(with_cell("Kernel Name", long_name)))
    assert export.kernels[0].name == long_name and len(export.kernels) == 7
    p = tmp_path / "huge.csv"
    p.write_text(with_cell("Kernel Name", "y" * (FIELD_LIMIT + 10)))
    out = rooftop("profile", "--ncu", str(p), "-d", "h200")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "line " in out.stderr and "field" in out.stderr


@pytest.mark.parametrize("value", ["-5", "inf", "-1e30"])
def test_a_kernel_with_a_negative_or_infinite_counter_is_left_out_and_counted(tmp_path: Path, value: str) -> None:
    text = with_cell(TIME, value, row=2)
    export = read_ncu(io.StringIO(text))
    assert len(export.kernels) == 6 and export.skipped == 1
    assert TIME in export.warning() and "ID 2" in export.warning()
    p = tmp_path / "neg.csv"
    p.write_text(text)
    out = rooftop("profile", "--ncu", str(p), "-d", "h200")
    assert out.returncode == 0 and "1 kernel row(s) left out" in out.stderr
    assert "-300" not in out.stdout and "nan" not in out.stdout.lower() and "inf" not in out.stdout.lower()
    doc = rooftop("profile", "--ncu", str(p), "-d", "h200", "--json")
    assert doc.returncode == 0 and '"skipped_rows": 1' in doc.stdout


def test_every_row_bad_is_no_kernel_rows_with_the_reason() -> None:
    rs, head = rows()
    col = rs[head].index("dram__bytes.sum.per_second")
    for r in rs[head + 2:]:
        r[col] = "-1"
    with pytest.raises(NcuError, match="no kernel rows.*dram__bytes"):
        read_ncu(io.StringIO(written(rs)))


def test_a_large_export_lists_the_longest_kernels_and_json_has_them_all(tmp_path: Path) -> None:
    rs, head = rows()
    data = rs[head + 2:]
    big = rs[: head + 2] + [[str(k), *data[k % len(data)][1:]] for k in range(700)]
    p = tmp_path / "big.csv"
    p.write_text(written(big))
    out = rooftop("profile", "--ncu", str(p), "-d", "h200", "--top", "5")
    assert out.returncode == 0 and "700 kernels from Nsight Compute" in out.stdout
    assert "the 5 longest" in out.stdout
    table = out.stdout.split("\n\n")[1].splitlines()
    assert len(table) == 1 + 5  # the header and the five longest
    doc = rooftop("profile", "--ncu", str(p), "-d", "h200", "--json")
    import json

    assert len(json.loads(doc.stdout)["kernels"]) == 700


def test_an_export_that_names_no_gpu_says_whose_roofs_it_is_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """One rule for a file's GPU: an ncu export without its device column is placed on the default device and
    says so, as a trace without deviceProperties does (it was placed there without a word)."""
    import json

    from rooftop.models.ncu import DEVICE_NAME
    from rooftop.tui.cli import main

    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)
    rs, head = rows()
    col = rs[head].index(DEVICE_NAME)
    for r in rs[head + 2:]:
        if len(r) > col:
            r[col] = ""
    p = tmp_path / "nameless.csv"
    p.write_text(written(rs))
    assert main(["profile", "--ncu", str(p), "--json"]) == 0
    captured = capsys.readouterr()
    device = json.loads(captured.out)["device"]
    assert captured.err.endswith(f"\nrooftop profile: the profile does not name its GPU (no {DEVICE_NAME} column): "
                                 f"the roofs shown are {device}'s; give -d ID for the GPU it ran on\n"), captured.err
    assert main(["profile", "--ncu", str(p), "--json", "-d", "h200"]) == 0  # -d: no word
    captured = capsys.readouterr()
    assert json.loads(captured.out)["device"] == "h200" and captured.err == ""
