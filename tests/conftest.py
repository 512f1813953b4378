import os
import sys
import tempfile
from pathlib import Path

# tests/ holds small helpers (a fake NVML) imported by name
sys.path.insert(0, str(Path(__file__).parent))

# Never the user's store: every test run gets its own empty data directory
# (tests that need a database pass --db / db_path explicitly).
os.environ["ROOFTOP_HOME"] = tempfile.mkdtemp(prefix="rooftop-tests-")
os.environ.pop("ROOFTOP_DB", None)


import pytest

from parallel import pytest_cmdline_main  # noqa: F401 - the whole default suite on two workers


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without a GPU, whatever it has: NVML finds no driver (a thin fake of pynvml).

    Tests of the no-GPU defaults use it so they pass on a GPU server too, where the real NVML names its GPUs.
    """
    from fake_nvml import FakeNVML, NVMLError_LibraryNotFound

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(init_error=NVMLError_LibraryNotFound()))
