"""Where a shared file may go, and that it is written whole or not at all: real folders, real modes (as root,
in a child without CAP_DAC_OVERRIDE, as tests/test_store_readonly.py does), real failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rooftop.models.errors import BadInput
from rooftop.tui.share.files import OutError, need_matplotlib, out_format, write_atomic
from test_store_readonly import without_override


@pytest.mark.parametrize("name,fmt", [("r.svg", "svg"), ("r.PNG", "png"), ("report.html", "html"),
                                      ("a.b.htm", "html")])
def test_the_extension_picks_the_format(tmp_path: Path, name: str, fmt: str) -> None:
    assert out_format(str(tmp_path / name)) == fmt


def test_a_bare_name_is_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert out_format("chart.svg") == "svg"


@pytest.mark.parametrize("name,says", [
    ("r.pdf", "'.pdf' is not a format rooftop writes; use .svg, .png or .html"),
    ("report", "no extension is not a format rooftop writes"),
    ("missing/r.svg", "does not exist"),
])
def test_bad_paths_are_one_line_naming_what_is_allowed(tmp_path: Path, name: str, says: str) -> None:
    with pytest.raises(OutError) as err:
        out_format(str(tmp_path / name))
    assert says in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, BadInput) and isinstance(err.value, ValueError)


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "d.svg").mkdir()
    with pytest.raises(OutError, match="is a folder"):
        out_format(str(tmp_path / "d.svg"))


def test_write_atomic_replaces_whole_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "c.svg"
    assert write_atomic(target, "<svg/>") == target and target.read_text() == "<svg/>"
    target.chmod(0o640)
    write_atomic(str(target), b"\x89PNG")
    assert target.read_bytes() == b"\x89PNG" and target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.svg"]


def test_a_new_file_gets_the_umask_mode_not_the_temp_files(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "u.png", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "u.png").stat().st_mode & 0o777 == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    target.write_text("old")

    (tmp_path / "sub").mkdir()
    with pytest.raises(OutError, match="cannot write .*Is a directory"):
        write_atomic(tmp_path / "sub", "new")  # os.replace onto a folder fails after the temp is written
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "sub"] and not list((tmp_path / "sub").iterdir())


def test_a_read_only_folder_is_refused_before_and_at_the_write(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code = ("import sys\nfrom rooftop.tui.share.files import OutError, out_format, write_atomic\n"
                "for f in (out_format, lambda p: write_atomic(p, 'x')):\n"
                "    try:\n        f(sys.argv[1]); print('no error')\n"
                "    except OutError as e:\n        print(e)\n")
        r = subprocess.run([*without_override(), sys.executable, "-c", code, str(folder / "r.svg")],
                           capture_output=True, text=True, timeout=60)
    finally:
        folder.chmod(0o755)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.endswith(f"the folder {folder} is read-only; choose a folder you can write to")
    assert second.startswith(f"cannot write {folder / 'r.svg'}: Permission denied")
    assert not list(folder.iterdir())


def test_without_matplotlib_the_extra_to_install_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert need_matplotlib().__name__ == "matplotlib"
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    with pytest.raises(OutError, match=r"^writing \.svg/\.png needs matplotlib: pip install 'rooftop\[share\]'$"):
        need_matplotlib()


def test_write_new_never_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    from rooftop.tui.share.files import write_new

    (tmp_path / "rooftop-x.svg").write_text("mine")
    first = write_new(tmp_path, "rooftop-x", ".svg", "<svg/>")
    second = write_new(tmp_path, "rooftop-x", ".svg", b"<svg/>")
    assert (first.name, second.name) == ("rooftop-x-2.svg", "rooftop-x-3.svg")
    assert (tmp_path / "rooftop-x.svg").read_text() == "mine" and second.read_text() == "<svg/>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rooftop-x-2.svg", "rooftop-x-3.svg", "rooftop-x.svg"]
