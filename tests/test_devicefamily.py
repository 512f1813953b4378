"""A trace's GPU placed on its own family's profile, or on none (and the caller says so): never another
vendor's roofs for it."""

from __future__ import annotations

import pytest
from rooftop.models.devicefamily import place_device

GiB = 2**30


@pytest.mark.parametrize(("name", "props", "want"), [
    ("NVIDIA H200", {}, "h200"),
    ("NVIDIA A100-PG509-200", {"totalGlobalMem": 42297524224, "warpSize": 32}, "a100"),
    ("NVIDIA A100-SXM4-80GB", {}, "a100"),
    ("NVIDIA GH200 480GB", {}, "gh200"),  # not h200: the longer family is tried first
    ("Tesla V100-SXM2-16GB", {}, "v100-16"),
    ("AMD Instinct MI250X / MI250", {}, "mi210"),
    ("AMD Radeon Graphics", {"numSms": 104, "warpSize": 64, "totalGlobalMem": 64 * GiB}, "mi210"),
    ("AMD Instinct MI300X", {}, "mi300x-ds"),
])
def test_a_named_device_gets_its_familys_profile(name, props, want):
    placed = place_device(name, props)
    assert placed.profile is not None and placed.profile.id == want
    assert placed.profile.vendor == placed.vendor


@pytest.mark.parametrize(("name", "props", "vendor"), [
    ("AMD Radeon Graphics", {"numSms": 60, "warpSize": 64}, "amd"),  # a consumer Radeon: no reference here
    ("Intel(R) Data Center GPU Max 1550", {}, ""),
    ("NVIDIA GeForce GTX 1080", {"warpSize": 32}, "nvidia"),
    ("AMD Instinct MI250X / MI250", {"numSms": 110, "warpSize": 64}, "amd"),  # an MI250X GCD: not an MI210
])
def test_a_device_of_no_known_family_gets_none_and_says_so(name, props, vendor):
    placed = place_device(name, props)
    assert placed.profile is None and placed.vendor == vendor
    assert "no reference profile" in placed.note and name in placed.note


def test_a_variant_with_other_memory_is_said_to_differ():
    note = place_device("NVIDIA A100-PG509-200", {"totalGlobalMem": 42297524224}).note
    assert "39 GiB" in note and "79 GiB" in note and "another variant" in note
    assert "another variant" not in place_device("NVIDIA A100-SXM4-80GB", {"totalGlobalMem": 85 * 10**9}).note
