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
    assert "  gemv N K [dtype]                           a GEMM with M = 1 (batch-1 decode)" in lines
    # the prose around them is wrapped, not left as one long line
    top = help_text([], capsys)
    assert "rooftop — a terminal roofline lab for GPU servers. It places an op (GEMM," in top.splitlines()


# -- rooftop watch ---------------------------------------------------------------------


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a function making the fake pynvml
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
    from rooftop.tui.report import telemetry_lines

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
