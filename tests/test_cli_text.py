"""What the command line writes, as text: every line within 80 columns, clean when piped to a file."""

from __future__ import annotations

import pytest

from rooftop.tui.cli import build_parser, main

WIDTH = 80


def subcommands() -> list[str]:
    """Every subcommand the parser has (so a new one is checked without editing this file)."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.choices and a.dest == "command"]  # argparse keeps them here
    return sorted(sub.choices)


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def too_wide(text: str) -> list[str]:
    return [f"{len(line)}: {line}" for line in text.splitlines() if len(line) > WIDTH]


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("command", [None, *subcommands()])
def test_every_help_fits_80_columns(command: str | None, columns: str, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """On an 80-column terminal and on a wide one (help is no wider there: long lines are hard to read)."""
    monkeypatch.setenv("COLUMNS", columns)
    text = help_text([command] if command else [], capsys)
    assert not too_wide(text), "\n".join(too_wide(text))


def test_help_keeps_the_example_blocks_as_written(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = help_text(["llm"], capsys).splitlines()
    i = lines.index("examples:")
    assert lines[i + 1:i + 3] == ["  rooftop llm qwen2.5-7b --device h100 --batch 1,8,16 \\",
                                  "      --measured-ms 11.56,11.9,12.5"]
    lines = help_text(["op"], capsys).splitlines()
    assert "  gemv N K [dtype] [wdtype=DTYPE]            a GEMM with M = 1 (batch-1 decode)" in lines
    # the prose around them is wrapped, not left as one long line
    top = help_text([], capsys)
    assert "rooftop — a terminal roofline lab for GPU servers. It places an op (GEMM," in top.splitlines()


# -- rooftop watch ---------------------------------------------------------------------


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):  # a function making the fake pynvml
    """Install a fake pynvml (fake_nvml.py) for `rooftop watch`: GPUs by name, or NVML missing."""
    from fake_nvml import FakeNVML, NVMLError_LibraryNotFound

    def install(*names: str) -> FakeNVML:
        fake = FakeNVML(names=list(names)) if names else FakeNVML(
            init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found"))
        monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
        return fake

    return install


def watch(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["watch", "--interval", "0.05", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_watch_says_why_there_is_no_gpu_once_and_keeps_lines_short(nvml, capsys: pytest.CaptureFixture[str]) -> None:
    nvml()
    rc, out, err = watch(["--count", "3"], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 3 and all(" cpu  util " in line for line in lines)
    assert not too_wide(out) and "NVML" not in out
    assert err.splitlines() == ["rooftop watch: NVML not available: NVML Shared Library Not Found (showing the CPU)"]


@pytest.mark.parametrize(("gpus", "words"), [
    ((), ("--gpu 3: there is no GPU to pick", "NVML not available")),
    (("NVIDIA H200", "NVIDIA H100"), ("--gpu 3: no such GPU", "0 (NVIDIA H200), 1 (NVIDIA H100)")),
])
def test_watch_gpu_that_is_not_there_is_one_line_and_exit_2(gpus: tuple[str, ...], words: tuple[str, ...], nvml,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    nvml(*gpus)
    rc, out, err = watch(["--gpu", "3", "--count", "1"], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert all(w in err for w in words), err


def test_watch_one_gpu_of_two(nvml, capsys: pytest.CaptureFixture[str]) -> None:
    nvml("NVIDIA H200", "NVIDIA H100")
    rc, out, err = watch(["--gpu", "1", "--count", "2"], capsys)
    assert rc == 0 and err == ""
    gpu_lines = [line for line in out.splitlines() if " gpu" in line]
    assert len(gpu_lines) == 2 and all(" gpu1 util 97% mem 41%" in line for line in gpu_lines)
    assert "throttle: power cap" in gpu_lines[0]
    assert not too_wide(out)


def test_telemetry_lines_fit_80_columns_at_their_widest() -> None:
    """Three-digit figures, every throttle reason, a 128-core CPU: still 80 columns, nothing important lost."""
    from rooftop.probes.telemetry import THROTTLING, CpuSnapshot, GpuSnapshot, Snapshot
    from rooftop.tui.render.telemetry import telemetry_lines

    g = GpuSnapshot(index=7, name="NVIDIA B300", gpu_util_pct=100, mem_util_pct=100, sm_clock_mhz=2100,
                    mem_clock_mhz=3996, sm_clock_max_mhz=2100, power_w=1400, power_limit_w=1400, temperature_c=105,
                    memory_used_bytes=270.5 * 2**30, memory_total_bytes=288 * 2**30, pcie_tx_bytes_s=55.1e9,
                    pcie_rx_bytes_s=55.2e9, clock_events=THROTTLING)
    cpu = CpuSnapshot(util_pct=100, per_core_pct=(100.0,) * 128, freq_mhz=3700, memory_used_bytes=1900 * 2**30,
                      memory_total_bytes=2048 * 2**30, load1=128.25)
    lines = telemetry_lines(Snapshot(time=0, gpus=(g,), cpu=cpu))
    assert not too_wide("\n".join(lines)), lines
    text = "\n".join(lines)
    assert "util 100% mem 100%" in text and "1400/1400 W" in text and "105°C" in text and "270.5/288 GiB" in text
    assert "cores 100 100" not in text
    assert "throttle: " + ", ".join(THROTTLING) in text
    assert "busiest core 100%" in lines[-1] or "max 100%" in lines[-1]


# -- reports piped to a file -------------------------------------------------------------


def split_pairs(text: str) -> list[str]:
    """Line ends that part what belongs together: a value from its unit, `I =` from its value."""
    from rooftop.tui.render.layout import GLUE

    lines = text.splitlines()
    out = []
    for a, b in zip(lines, lines[1:]):
        a, b = a.rstrip(), b.lstrip()
        if b.startswith(("= ", "→ ", "! ", "• ")):  # a marked item starts there
            continue
        if a and b and any(m.start() <= len(a) < m.end() for m in GLUE.finditer(f"{a} {b}")):
            out.append(f"{a!r} / {b!r}")
    return out


def printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


@pytest.fixture
def runs_db(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A store with two runs, one with a long hyphenated name; reports at 80 columns, as piped."""
    from tui_helpers import fixed_runs_db

    from rooftop.store.runs import Store

    db = tmp_path / "r.db"
    ids = fixed_runs_db(db)
    with Store.open(db) as store:
        store.rename(ids[1], "epyc-7763-cpu-baseline-long-name")
    monkeypatch.setenv("ROOFTOP_DB", str(db))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TZ", "UTC")
    return ids


@pytest.mark.parametrize("argv", [
    ["op", "attn b=8 h=32 kv=8 d=128 t=8192 decode", "-d", "h100"],
    ["op", "gemm 1 8192 8192 bf16", "-d", "h100,h200"],
    ["op", "gemm 1 8192 8192 bf16", "ew n=1e9 fp32", "-d", "h100,h200,a100", "--measured-ms", "0.1"],
    ["llm", "qwen2.5-7b", "-d", "h100", "--batch", "1,8", "--measured-ms", "5,6"],
    ["llm", "qwen2.5-7b", "-d", "h100", "--parts", "attention=17.6,mlp=24", "--speedup", "attention=1.67"],
    ["devices"], ["devices", "h100"], ["compare", "h100", "mi300x-ds"], ["runs"], ["show", "lab-box"],
    ["plot", "-d", "h100", "--op", "attn b=8 h=32 kv=8 d=128 t=8192 decode", "--width", "80", "--height", "20"],
])
def test_reports_in_a_file_are_clean(argv: list[str], runs_db, capsys: pytest.CaptureFixture[str]) -> None:
    """No trailing spaces (Rich pads cells and wrapped lines), 80 columns, no value parted from its unit."""
    out = printed(argv, capsys)
    assert [line for line in out.splitlines() if line != line.rstrip()] == []
    assert not too_wide(out), "\n".join(too_wide(out))
    assert split_pairs(out) == [], split_pairs(out)
    assert "\xa0" not in out  # the glue is printed as an ordinary space


def test_op_header_keeps_each_figure_whole_and_notes_hang(runs_db, capsys: pytest.CaptureFixture[str]) -> None:
    out = printed(["op", "attn b=8 h=32 kv=8 d=128 t=8192 decode", "-d", "h100"], capsys)
    lines = out.splitlines()
    assert any(line.endswith("I 4.00 FLOP/B") for line in lines), out
    advice = lines[next(i for i, line in enumerate(lines) if line.startswith(" → ")):]
    assert all(line.startswith((" → ", " · ", "   ")) for line in advice), "\n".join(advice)
    assert len(advice) > sum(line.startswith(" → ") for line in advice)  # some advice did wrap


def test_devices_ends_a_cut_name_with_an_ellipsis(runs_db, capsys: pytest.CaptureFixture[str]) -> None:
    """At 80 columns a device name too long for its column is cut with "…", never mid-word without a mark."""
    from rooftop.models.catalog import catalog

    out = printed(["devices"], capsys)
    names = {p.id: p.name for p in catalog().values()}
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in names}
    cut = 0
    for dev_id, line in rows.items():
        full = names[dev_id]
        shown = line[line.index("  " + full[:6]) + 2:] if "  " + full[:6] in line else ""
        assert shown == full or (shown.endswith("…") and full.startswith(shown[:-1])), (full, line)
        cut += shown != full
    assert cut and len(rows) == len(names)


def test_runs_folds_a_long_name_at_its_hyphens(runs_db, capsys: pytest.CaptureFixture[str]) -> None:
    out = printed(["runs"], capsys)
    rows = out.splitlines()
    start = next(i for i, line in enumerate(rows) if line.startswith("c0ffee00"))
    name_col = rows[0].index("name")
    table = rows[start:rows.index("", start)]
    pieces = [line[name_col:].split(" ")[0] for line in table if line[name_col:name_col + 1].strip()]
    assert "".join(pieces) == "epyc-7763-cpu-baseline-long-name"
    assert all(p.endswith("-") for p in pieces[:-1]), pieces


def test_measure_report_indents_what_wraps() -> None:
    """A long skip reason and a long note continue under their own text, not at column 0."""
    import io

    from rich.console import Console

    from rooftop.models.calibrate import calibrate
    from rooftop.tui.render.measure_report import measure_report
    from rooftop.tui.render.layout import TrimmedLines
    from test_calibrate import CPU
    from test_measure_report import samples

    ss = samples()
    buf = io.StringIO()
    Console(file=TrimmedLines(buf), width=80, no_color=True).print(
        measure_report(calibrate(ss, CPU), ss, ["bandwidth = algorithmic bytes / time, each array counted once, "
                                                 "the reference protocol's way; rooftop reports it everywhere"]))
    lines = buf.getvalue().splitlines()
    tail = lines[next(i for i, line in enumerate(lines) if line.endswith("skipped:")) + 1:]
    assert tail[:2] == ["  2× over the plan's per-call time budget (measured or predicted from a smaller",
                        "     size)"]
    notes = tail[tail.index("notes:") + 1:]
    assert notes[0].startswith(" • bandwidth") and notes[1].startswith("   ") and notes[1].strip()
    assert all(line.startswith((" • ", "   ")) for line in notes), notes


def test_trimmed_lines_drop_only_the_spaces_at_a_line_end() -> None:
    import io

    from rooftop.tui.render.layout import TrimmedLines

    buf = io.StringIO()
    f = TrimmedLines(buf)
    for part in ("a  b   ", "\nc  ", " ", "d\n  \n"):
        f.write(part)
    assert buf.getvalue() == "a  b\nc   d\n\n"


@pytest.mark.parametrize("spec", ["gemm 1 8192 8192 bf16", "attn b=8 h=32 kv=8 d=128 t=8192 decode"])
def test_op_report_never_parts_a_figure_at_any_width(spec: str) -> None:
    """At every width from 40 to 80: `I 1.000 FLOP/B` stays whole, advice continues under its text."""
    import io

    from rich.console import Console

    from rooftop.models.analysis import analyze
    from rooftop.models.catalog import lookup_device
    from rooftop.models.spec import parse_specs
    from rooftop.tui.render.layout import TrimmedLines
    from rooftop.tui.render.report import analysis_table

    (op,) = parse_specs([spec])
    report = analysis_table([analyze(op, lookup_device("h100"))])
    for width in range(40, 81):
        buf = io.StringIO()
        Console(file=TrimmedLines(buf), width=width, no_color=True).print(report)
        lines = buf.getvalue().splitlines()
        head = lines[:next(i for i, line in enumerate(lines) if line.startswith("W = "))]
        assert not [line for line in head if line.endswith((" W", " Q", " I"))], (width, head)
        assert split_pairs(buf.getvalue()) == [], (width, split_pairs(buf.getvalue()))
        advice = lines[next(i for i, line in enumerate(lines) if line.startswith(" → ")):]
        assert all(line.startswith((" → ", " · ", "   ")) for line in advice), (width, advice)


# -- small things said right ---------------------------------------------------------------


@pytest.mark.parametrize(("argv", "words"), [
    (["llm", "qwen2.5-7b", "-d", "h100", "--batch", "1,,2"], ("--batch '1,,2': an empty item",)),
    (["llm", "qwen2.5-7b", "-d", "h100", "--batch", "1,"], ("--batch '1,': an empty item",)),
    (["llm", "qwen2.5-7b", "-d", "h100", "--context", ",4096"], ("--context ',4096': an empty item",)),
    (["llm", "qwen2.5-7b", "-d", "h100", "--prompt", ""], ("--prompt '': give one number",)),
    (["llm", "qwen2.5-7b", "-d", "h100", "--prompt", "128,256"], ("--prompt '128,256': give one number",)),
    (["llm", "qwen2.5-7b", "-d", "h100", "--measured-ms", "1,2"], ("gives 2 times for 1 op:",)),
    (["op", "gemm 1 2 3", "--measured-ms", "1,2", "-d", "h100"], ("gives 2 times for 1 op:",)),
])
def test_list_options_refuse_what_they_cannot_mean(argv: list[str], words: tuple[str, ...], runs_db,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err, err
    assert all(w in err for w in words), err


def test_one_op_kind_below_a_launch_is_said_in_the_singular(runs_db, capsys: pytest.CaptureFixture[str]) -> None:
    out = " ".join(printed(["llm", "qwen2.5-7b", "--phase", "prefill", "--batch", "8", "-d", "h100"], capsys).split())
    assert "1 op kind is bounded below one kernel launch" in out and "sets its time" in out


def test_an_unknown_device_is_told_of_local_too(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`local` (this host's latest measured run) is a device like the others: the list of choices names it."""
    from test_tui_history import seeded_db

    seeded_db(tmp_path / "r.db")  # measured on this host: it is `local`
    monkeypatch.setenv("ROOFTOP_DB", str(tmp_path / "r.db"))
    for argv in (["op", "gemm 1 2 3", "-d", "zzz"], ["devices", "zzz"], ["compare", "h100", "zzz"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "unknown device 'zzz'; choose one of: " in err and err.rstrip().endswith(", local"), err
    assert main(["op", "gemm 1 2 3 fp32", "-d", "local"]) == 0  # and it still works as a device
    assert "local (measured)" in capsys.readouterr().out


def test_a_cpu_profile_names_its_cache_and_threads_as_a_cpu_has_them() -> None:
    from rich.console import Console

    from rooftop.models.profile import Ceiling, DeviceProfile
    from rooftop.tui.render.report import device_detail

    cpu = DeviceProfile("local", "AMD EPYC", "measured", {"dram": Ceiling(30e9, "measured", "triad:268435452")}, {},
                        kind="cpu", sm_count=1, l2_bytes=32 * 2**20)
    console = Console(width=80, record=True)
    console.print(device_detail(cpu))
    text = " ".join(console.export_text().split())
    assert "last-level cache (the llc level) 32.0 MiB" in text and "measured with 1 thread" in text
    assert "SMs" not in text


@pytest.mark.parametrize("command", [None, "llm"])
def test_device_help_names_local_first(command: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """The default device is this machine's measured profile before the GPU's reference (as `op` says on
    stderr and the README), so --help must not say 'this GPU's, else h100' alone."""
    text = " ".join(help_text([command] if command else [], capsys).split())
    assert "measured profile `local`, else this GPU's reference, else h100" in text


@pytest.mark.parametrize("columns", ["0", "1", "12"])
def test_a_width_too_narrow_to_read_lays_reports_out_at_80(columns: str, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS=0 printed nothing and exited 0; COLUMNS=1 a letter a line."""
    argv = ["op", "gemm", "4k", "4k", "4k", "-d", "h100"]
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    want = capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", columns)
    assert main(argv) == 0
    got = capsys.readouterr().out
    assert got == want and "T ≥" in got


def test_five_devices_at_80_columns_keep_their_figures_whole(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """They folded mid-word (`802.4 TFLOP/` over `s`, `compute-boun` over `d`); now the devices that do not fit
    go to a second table."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["op", "gemm", "4096", "4096", "4096", "-d", "h100,h200,b300,mi300x-ds,l40s-ds"]) == 0
    out = capsys.readouterr().out
    assert out.count("compute-bound ") + out.count("compute-bound\n") >= 5 and "compute-boun\n" not in out
    assert not any(line.rstrip().endswith(("TFLOP/", "GB/")) for line in out.splitlines())
    assert all(len(line) <= 80 for line in out.splitlines())


def test_compare_without_a_pair_to_cross_says_why(tmp_path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile with no DRAM slope made an empty pair table with no word."""
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path))
    roofs = tmp_path / "roofs.csv"
    roofs.write_text("target,dtype,bandwidth_gb_s,peak_tflop_s,ridge_flop_byte,bw_case,compute_case\n"
                     "nobw,fp64,,64.2,,,8192x8192x8192\n")
    assert main(["import", str(roofs)]) == 0
    capsys.readouterr()
    assert main(["compare", "h100", "nobw-imported"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no crossovers: nobw-imported has no DRAM bandwidth" in out
    assert main(["compare", "h100", "h200"]) == 0
    assert "no crossovers" not in capsys.readouterr().out
