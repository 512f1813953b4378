"""A trace's GPU placed on its own profile, by its name and told apart by its properties (SMs or CUs, memory,
compute capability or gfx version, runtime), or by its properties alone where its name says nothing; a GPU
no profile fits gets none, with the closest named: never another GPU's roofs for it."""

from __future__ import annotations

import pytest
from rooftop.models.catalog import catalog
from rooftop.models.devicefamily import identify, is_generic, place_device, same_model

GiB = 2**30
MiB = 2**20
HIP = {"hip_runtime_version": 70051831, "roctracer_version": 4.1}
CUDA = {"cuda_runtime_version": 12040, "cupti_version": 22}


@pytest.mark.parametrize(("name", "props", "want"), [
    ("NVIDIA H200", {}, "h200"),
    ("NVIDIA A100-PG509-200", {"totalGlobalMem": 42297524224, "warpSize": 32}, "a100"),
    ("NVIDIA A100-SXM4-80GB", {}, "a100"),
    ("NVIDIA GH200 480GB", {}, "gh200"),  # not h200: the longer family is tried first
    ("Tesla V100-SXM2-16GB", {}, "v100-16"),
    ("AMD Instinct MI250X / MI250", {}, "mi210"),
    ("AMD Radeon Graphics", {"numSms": 104, "warpSize": 64, "totalGlobalMem": 64 * GiB}, "mi210"),
    ("AMD Instinct MI300X", {}, "mi300x-ds"),
    # the catalog's new cards, as torch names them, with the properties it reports
    ("NVIDIA L4", {"numSms": 58, "totalGlobalMem": 23034 * MiB, "computeMajor": 8, "computeMinor": 9}, "l4-ds"),
    ("NVIDIA A10G", {"numSms": 80, "totalGlobalMem": 22587 * MiB, "computeMajor": 8, "computeMinor": 6}, "a10g-ds"),
    ("NVIDIA A10", {"numSms": 72}, "a10-ds"),  # not the A100: a fragment ends on a word's edge
    ("Tesla T4", {"numSms": 40, "totalGlobalMem": 15109 * MiB}, "t4-ds"),
    ("GeForce RTX 2080 Ti", {"numSms": 68, "totalGlobalMem": 11019 * MiB}, "rtx2080ti-ds"),  # torch 1.8's name
    ("NVIDIA GeForce RTX 3090", {"numSms": 82}, "rtx3090-ds"),
    ("NVIDIA GeForce RTX 4090", {"numSms": 128, "totalGlobalMem": 24564 * MiB}, "rtx4090-ds"),
    ("NVIDIA GeForce RTX 5090", {"numSms": 170}, "rtx5090-ds"),
    ("NVIDIA H20", {"numSms": 78, "totalGlobalMem": 97285 * MiB}, "h20-ds"),  # not h200
    ("NVIDIA H800", {"numSms": 132}, "h800-ds"),
    ("NVIDIA A800-SXM4-80GB", {"numSms": 108}, "a800-ds"),
    ("NVIDIA H100 PCIe", {"numSms": 114}, "h100-pcie-ds"),
    ("NVIDIA H100 NVL", {"numSms": 132, "totalGlobalMem": 95830 * MiB}, "h100-nvl-ds"),  # its 94 GB, not the SXM's 80
    ("NVIDIA B200", {"numSms": 148, "totalGlobalMem": 182631 * MiB}, "b200-ds"),
    ("NVIDIA GB200", {}, "gb200-ds"),  # not b200
    ("AMD Instinct MI210", {"numSms": 104}, "mi210"),
    ("AMD Instinct MI250X / MI250", {"numSms": 110, "warpSize": 64}, "mi250x-gcd-ds"),  # an MI250X GCD: no MI210
    ("AMD Instinct MI325X", {"numSms": 304}, "mi325x-ds"),
    ("AMD Instinct MI355X", {"numSms": 256}, "mi355x-ds"),
])
def test_a_named_device_gets_its_own_profile(name, props, want):
    placed = place_device(name, props)
    assert placed.profile is not None and placed.profile.id == want, placed.note
    assert placed.profile.vendor == placed.vendor


@pytest.mark.parametrize(("props", "meta", "want"), [
    # the vLLM MI300X trace's deviceProperties: name "", 304 CUs, warp 64, 192 GiB, gfx 9.4, HIP runtime
    ({"name": "", "totalGlobalMem": 206141652992, "computeMajor": 9, "computeMinor": 4, "warpSize": 64,
      "numSms": 304}, HIP, "mi300x-ds"),
    ({"totalGlobalMem": 256 * GiB, "computeMajor": 9, "computeMinor": 4, "warpSize": 64, "numSms": 304}, HIP,
     "mi325x-ds"),  # the same CUs and gfx: its 256 GiB tell it apart
    ({"totalGlobalMem": 288 * GiB, "computeMajor": 9, "computeMinor": 5, "warpSize": 64, "numSms": 256}, HIP,
     "mi355x-ds"),
    ({"totalGlobalMem": 64 * GiB, "computeMajor": 9, "computeMinor": 0, "warpSize": 64, "numSms": 110}, HIP,
     "mi250x-gcd-ds"),
])
def test_a_nameless_device_is_placed_by_its_properties(props, meta, want):
    placed = place_device("", props, metadata=meta)
    assert placed.profile is not None and placed.profile.id == want, placed.note
    assert "by its properties" in placed.note and f"{props['numSms']} compute units" in placed.note
    assert placed.vendor == "amd" and "HIP runtime" in placed.note


def test_the_runtime_alone_says_the_vendor():
    assert identify("", {"numSms": 304}, HIP).vendor == "amd"
    assert identify("", {"numSms": 132}, CUDA).vendor == "nvidia"
    assert identify("", {}, {}).vendor == ""


def test_properties_that_fit_two_cards_place_on_neither_and_name_both():
    """Without its memory an MI300X cannot be told from an MI325X (same CUs, same gfx 9.4)."""
    placed = place_device("", {"numSms": 304, "computeMajor": 9, "computeMinor": 4, "warpSize": 64}, metadata=HIP)
    assert placed.profile is None
    assert set(placed.closest) == {"mi300x-ds", "mi325x-ds"} and "cannot tell" in placed.note


@pytest.mark.parametrize(("name", "props", "vendor"), [
    ("AMD Radeon Graphics", {"numSms": 60, "warpSize": 64}, "amd"),  # a consumer Radeon: no profile here
    ("Intel(R) Data Center GPU Max 1550", {}, ""),
    ("NVIDIA GeForce GTX 1080", {"warpSize": 32}, "nvidia"),
    ("NVIDIA GeForce RTX 4090 D", {"numSms": 114, "warpSize": 32}, "nvidia"),  # a 4090 by name, not by its SMs
    ("NVIDIA H100 MIG 1g.10gb", {"numSms": 16}, "nvidia"),  # a slice, not the whole H100
    ("NVIDIA L40", {"numSms": 142}, "nvidia"),  # neither the L4 nor the L40S
    ("NVIDIA Frobnicator X9", {"numSms": 77, "totalGlobalMem": 40 * GiB, "computeMajor": 9, "computeMinor": 7}, "nvidia"),
])
def test_a_device_no_profile_fits_gets_none_says_so_and_names_the_closest(name, props, vendor):
    placed = place_device(name, props)
    assert placed.profile is None and placed.vendor == vendor
    assert "no profile for" in placed.note and name in placed.note
    assert len(placed.closest) == 2 and all(c in catalog() for c in placed.closest)


def test_the_closest_are_of_the_same_vendor_and_architecture_first():
    placed = place_device("NVIDIA GeForce RTX 3080", {"numSms": 68, "totalGlobalMem": 10 * GiB, "computeMajor": 8,
                                                      "computeMinor": 6}, metadata=CUDA)
    assert placed.profile is None
    assert set(placed.closest) <= {"rtx3090-ds", "a10-ds", "a10g-ds"}, placed.closest
    amd = place_device("", {"numSms": 80, "totalGlobalMem": 192 * GiB, "computeMajor": 9, "computeMinor": 4},
                       metadata=HIP)  # a cut-down CDNA 3 part
    assert amd.profile is None and {"mi300x-ds"} <= set(amd.closest) and "80 compute units" in amd.note


def test_a_variant_with_other_memory_is_said_to_differ():
    note = place_device("NVIDIA A100-PG509-200", {"totalGlobalMem": 42297524224}).note
    assert "39 GiB" in note and "79 GiB" in note and "another variant" in note
    assert "another variant" not in place_device("NVIDIA A100-SXM4-80GB", {"totalGlobalMem": 85 * 10**9}).note


def test_names_that_say_nothing_and_names_of_one_model():
    assert is_generic("") and is_generic("AMD Radeon Graphics") and not is_generic("AMD Instinct MI300X")
    assert same_model("NVIDIA H200 SXM 141GB", "NVIDIA H200")
    assert not same_model("NVIDIA L4", "NVIDIA L40S") and not same_model("NVIDIA A10", "NVIDIA A100-SXM4-80GB")
    assert not same_model("NVIDIA H200 MIG 3g.71gb", "NVIDIA H200")


def test_every_family_names_profiles_of_the_catalog_with_their_facts():
    """A family's profiles exist, are GPUs of its vendor, and say their SM (CU) count, which tells them apart."""
    from rooftop.models.devicefamily import families

    cat = catalog()
    for f in families():
        assert f["arch"] and all(i in cat for i in f["profiles"]), f["family"]
        for i in f["profiles"]:
            assert cat[i].vendor == f["vendor"] and cat[i].kind == "gpu", i
            assert cat[i].sm_count or i == "gb200-ds", i  # NVIDIA publishes no SM count for GB200
