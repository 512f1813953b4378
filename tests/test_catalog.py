"""The built-in catalog: every reference target, datasheet cards labelled as such."""

from __future__ import annotations

import csv
import io
from importlib import resources

import pytest

from rooftop.models.catalog import UnknownDevice, catalog, find_by_name, lookup_device
from rooftop.models.profile import DeviceProfile

REFERENCE_TARGETS = ["v100-16", "v100-32", "v100-32-pcie", "a100", "h100", "h200", "h200-mig", "b300", "gh200",
                     "mi100", "mi210", "rtx4080"]


def _packaged_roofs() -> list[dict[str, str]]:
    text = resources.files("rooftop.models").joinpath("data", "reference", "roofs.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def test_every_reference_target_is_in_the_catalog_with_provenance() -> None:
    cat = catalog()
    for t in REFERENCE_TARGETS:
        p = cat[t]
        assert p.source == "reference"
        assert all(c.source == "reference" for c in p.peak.values())
        assert p.bandwidth["dram"].case  # which case produced B


def test_packaged_ridges_equal_the_reference_ridge_column() -> None:
    """The catalog recomputes I* = F/B; it must agree with roofs.csv's own ridge column."""
    rows = _packaged_roofs()
    assert len(rows) == 59
    path = {"fp64": "fp64-tc", "fp32": "fp32-matmul", "tf32": "tf32-tc", "fp16": "fp16-tc", "bf16": "bf16-tc",
            "fp8_e4m3": "fp8-tc", "nvfp4": "fp4-tc"}
    for r in rows:
        p = lookup_device(r["target"])
        assert p.ridge(path[r["dtype"]]) == pytest.approx(float(r["ridge_flop_byte"]), rel=1e-9)


def test_device_facts_and_fma_plateaus() -> None:
    h100 = lookup_device("h100")
    assert h100.name == "NVIDIA H100 80GB HBM3"
    assert h100.l2_bytes == 50 * 2**20
    assert h100.sm_count == 132
    assert h100.power_limit_w == 700
    assert h100.F("fp32-fma") == pytest.approx(61.5e12)  # seed 000 table 5
    assert h100.F("fp64-fma") == pytest.approx(32.9e12)
    assert lookup_device("mi100").power_limit_w is None  # "see ROCm raw telemetry"
    assert lookup_device("b300").F("fp4-tc") == pytest.approx(4802.736473994656e12)


def test_datasheet_profiles_are_labelled_and_dense() -> None:
    cat = catalog()
    for i in ("h100-sxm-ds", "h200-ds", "b200-ds", "a100-80g-ds", "mi300x-ds", "l40s-ds"):
        p = cat[i]
        assert p.source == "datasheet"
        assert p.notes
    # dense, not sparse: H100 SXM bf16 is 989 (1979 is the sparse figure)
    assert cat["h100-sxm-ds"].F("bf16-tc") == pytest.approx(989.4e12)
    # a number the datasheet does not give carries its own provenance
    assert cat["l40s-ds"].peak["fp64-fma"].source == "typical"


def test_lookup_is_case_insensitive_and_errors_list_choices() -> None:
    assert lookup_device("H100").id == "h100"
    with pytest.raises(UnknownDevice) as err:
        lookup_device("h999")
    assert "h999" in str(err.value) and "h100" in str(err.value)


def test_find_by_nvml_name() -> None:
    assert find_by_name("NVIDIA H200").id == "h200"
    assert find_by_name("NVIDIA Nonexistent") is None


def test_profile_dict_round_trip() -> None:
    for p in catalog().values():
        assert DeviceProfile.from_dict(p.to_dict()) == p


def test_profile_dict_gives_plain_numbers_and_keeps_provenance() -> None:
    d = lookup_device("h200").to_dict()
    assert d["bandwidth"]["dram"] == pytest.approx(4295e9, rel=1e-3)
    assert d["peak"]["bf16-tc"] == pytest.approx(815e12, rel=1e-2)
    assert d["ceilings"]["bandwidth"]["dram"]["source"] == "reference"
    assert d["ceilings"]["peak"]["bf16-tc"]["case"]


def test_profile_reads_the_older_object_form() -> None:
    p = lookup_device("h100")
    old = {**p.to_dict(), "ceilings": {},
           "launch_overhead": p.launch_overhead.to_dict() if p.launch_overhead else None,
           "bandwidth": {k: c.to_dict() for k, c in p.bandwidth.items()},
           "peak": {k: c.to_dict() for k, c in p.peak.items()}}
    assert DeviceProfile.from_dict(old) == p
