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


NEW_DATASHEETS = ["l4-ds", "a10-ds", "a10g-ds", "t4-ds", "rtx2080ti-ds", "rtx3090-ds", "rtx4090-ds", "rtx5090-ds",
                  "h20-ds", "h800-ds", "a800-ds", "h100-pcie-ds", "h100-nvl-ds", "gb200-ds", "mi210-ds",
                  "mi250x-gcd-ds", "mi325x-ds", "mi355x-ds"]


def _datasheets() -> list[DeviceProfile]:
    return [p for p in catalog().values() if p.source == "datasheet"]


def test_every_datasheet_entry_names_its_document_and_where_it_is() -> None:
    cat = catalog()
    assert set(NEW_DATASHEETS) <= set(cat)
    for p in _datasheets():
        assert p.notes and p.vendor in ("nvidia", "amd") and p.memory_bytes, p.id
        assert all(c.source in ("datasheet", "typical") and c.case for c in [*p.peak.values(), *p.bandwidth.values()])
        url = p.extra.get("url")
        assert url is None or url.startswith("https://"), p.id
        # where no vendor page holds the document (H20, H800, A800: issued on nvidia.cn or to partners), it says so
        assert url or "datasheet" in p.notes or "product brief" in p.notes, p.id
    assert all(cat[i].extra.get("url") for i in NEW_DATASHEETS if i not in ("h20-ds", "h800-ds", "a800-ds"))


def test_ridges_are_sane_and_the_roofs_ordered() -> None:
    """Every GPU's ridge on every path lies in 0.05–2000 FLOP/byte; lower precision never has a lower roof."""
    for p in catalog().values():
        if p.kind != "gpu" or "dram" not in p.bandwidth:
            continue
        for path in p.paths():
            assert 0.05 < p.ridge(path) < 2000, (p.id, path, p.ridge(path))
        ladder = [x for x in ("fp64-tc", "tf32-tc", "fp16-tc", "fp8-tc", "fp4-tc") if x in p.peak]
        if p.source == "datasheet":
            assert all(p.F(a) <= p.F(b) for a, b in zip(ladder, ladder[1:])), p.id
            assert p.F("fp32-fma") <= p.F("fp32-matmul") and p.F("fp64-fma") <= p.F("fp64-tc"), p.id
            if "bf16-tc" in p.peak:
                assert p.F("bf16-tc") == p.F("fp16-tc"), p.id
            if "int8-tc" in p.peak:
                assert p.F("int8-tc") >= p.F("fp16-tc"), p.id


def test_datasheet_tensor_figures_are_dense_not_sparse() -> None:
    """FLOP per SM (CU) per clock at the figure's boost clock: a dense fp16 matrix rate is at most 4096 (Hopper,
    CDNA 3 and 4: 2048 and 4096 per CU) on any card here; a sparse figure given as dense would be twice that."""
    for p in _datasheets():
        clock = p.extra.get("clock_hz")
        if clock and p.sm_count:
            per = p.F("fp16-tc") / (p.sm_count * clock)
            assert 400 < per <= 4100, (p.id, per)
    assert catalog()["l4-ds"].F("fp16-tc") == pytest.approx(121e12)  # the datasheet's 242 is with sparsity
    assert catalog()["mi355x-ds"].F("fp16-tc") == pytest.approx(2516.6e12)  # AMD's 2.5 PF dense; 5.0 is sparse


@pytest.mark.parametrize(("geforce", "datacenter"), [("rtx2080ti-ds", "t4-ds"), ("rtx3090-ds", "a10-ds"),
                                                     ("rtx4090-ds", "l4-ds")])
def test_a_geforce_fp16_roof_is_its_fp32_accumulate_figure(geforce: str, datacenter: str) -> None:
    """PyTorch's fp16 and bf16 GEMMs accumulate in FP32, which GeForce cards run at half the rate: per SM and
    clock, half of the same chip generation's data-center card (T4 / Turing, A10 / GA102, L4 / Ada)."""
    cat = catalog()
    g, d = cat[geforce], cat[datacenter]
    per = {p.id: p.F("fp16-tc") / (p.sm_count * p.extra["clock_hz"]) for p in (g, d)}
    assert per[geforce] == pytest.approx(per[datacenter] / 2, rel=0.03), per
    assert "FP32 accumulate" in g.peak["fp16-tc"].case and "half" in g.peak["fp16-tc"].case
    assert cat["rtx5090-ds"].F("fp16-tc") == pytest.approx(209.5e12)  # 419 with FP16 accumulate, 838 sparse


def test_amd_gpus_have_an_xgmi_link_and_nvidia_gpus_none() -> None:
    for p in _datasheets():
        if p.vendor == "amd":
            assert "xgmi" in p.bandwidth and "nvlink" not in p.bandwidth, p.id
            assert "Infinity Fabric" in p.bandwidth["xgmi"].case, p.id
        else:
            assert "xgmi" not in p.bandwidth, p.id
    assert catalog()["mi300x-ds"].B("xgmi") == 448e9  # 7 links x 128 GB/s, both directions: 896


def test_every_catalog_device_has_an_architecture_family() -> None:
    text = resources.files("rooftop.models").joinpath("data", "device_families.csv").read_text()
    assert set(catalog()) == {r["target"] for r in csv.DictReader(io.StringIO(text))}


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
