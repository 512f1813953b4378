"""The fleet's rows, median and straggler rule, and `check`'s tolerance: pure functions on profiles."""

from __future__ import annotations

import pytest

from rooftop.models.check import CheckError, check_fleet, check_profile, tolerance_problem, verdict
from rooftop.models.fleet import Member, ceiling_values, fleet_report, member_from_dict, run_conditions
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample


def prof(dram: float = 3.0e12, bf16: float = 700e12, launch: float = 5e-6, pid: str = "x") -> DeviceProfile:
    return DeviceProfile(pid, "NVIDIA H100", "measured", {"dram": Ceiling(dram, "measured")},
                         {"bf16-tc": Ceiling(bf16, "measured")}, launch_overhead=Ceiling(launch, "measured"))


def member(rank: int, model: str = "NVIDIA H100", **kw) -> Member:
    throttle = kw.pop("throttle", ())
    processes = kw.pop("processes", ())
    return Member(rank, f"node{rank // 8}", f"cuda:{rank % 8}", model, prof(**kw), throttle=throttle,
                  processes=processes)


def test_median_row_and_a_dram_straggler_named():
    ms = [member(0), member(1), member(2, dram=2.5e12), member(3, dram=3.1e12)]
    rep = fleet_report(ms)
    (g,) = rep.groups
    assert g.median["B dram"] == pytest.approx(3.0e12)  # median of 3.0, 3.0, 2.5, 3.1
    assert [(f.rank, f.ceiling) for f in rep.stragglers] == [(2, "B dram")]
    f = rep.stragglers[0]
    assert f.value == 2.5e12 and f.reference == pytest.approx(3.0e12)
    assert "B dram" in f.text and "2500 GB/s" in f.text and "node0" in f.text


def test_just_above_the_rule_is_not_a_straggler_and_launch_is_a_time():
    rep = fleet_report([member(0), member(1), member(2, dram=0.91 * 3e12, launch=5e-6 / 0.85)])
    assert [(f.rank, f.ceiling) for f in rep.stragglers] == [(2, "launch")]  # slower launch floor: higher time


def test_mixed_models_are_compared_within_their_own_model():
    ms = [member(0), member(1), member(2, model="NVIDIA H200", dram=4.8e12), member(3, model="NVIDIA H200", dram=4.8e12)]
    rep = fleet_report(ms)
    assert not rep.stragglers  # the H100s are not slow H200s
    assert {g.model: g.median["B dram"] for g in rep.groups} == {"NVIDIA H100": 3e12, "NVIDIA H200": 4.8e12}
    assert any("compared with its own kind" in n for n in rep.notes)


def test_capped_busy_and_lost_members_are_flagged():
    lost = Member(3, "node0", "cuda:3", "NVIDIA H100", None, status="lost", error="no result within 30 s")
    rep = fleet_report([member(0, throttle=("power cap",)), member(1, throttle=("hw thermal",)),
                        member(2, processes=("4242 python",)), lost])
    kinds = {(f.rank, f.kind) for f in rep.flags}
    assert {(0, "power"), (1, "thermal"), (2, "busy"), (3, "lost")} <= kinds
    assert any("4242 python" in f.text for f in rep.flags)
    assert rep.to_dict()["rows"][3]["status"] == "lost"


def test_shared_budget_flag_against_the_device_alone():
    m = Member(0, "n", "cuda:0", "NVIDIA H100", prof(dram=2.0e12), alone=prof(dram=3.0e12))
    (f,) = [f for f in fleet_report([m]).flags if f.kind == "shared"]
    assert f.ceiling == "B dram" and f.reference == 3.0e12


def test_member_round_trips_through_its_dict():
    m = member(5, throttle=("power cap",), processes=("1 init",))
    back = member_from_dict(m.to_dict(), m.profile)
    assert back == m


def test_run_conditions_from_samples():
    def point(**conditions) -> Sample:
        return Sample(family="gemm", dtype="bf16", shape={}, flops=1, bytes=1, footprint_bytes=1, conditions=conditions)

    s = [point(mean_sm_clock_mhz=1800, mean_power_w=600, power_limit_w=700, throttle=["power cap"]),
         point(mean_sm_clock_mhz=1600, throttle=[])]
    c = run_conditions(s)
    assert c["sm_clock_mhz"] == 1700 and c["power_w"] == 600 and c["throttle"] == ("power cap",)


def test_check_against_a_baseline_names_the_short_ceiling_with_both_figures():
    run, base = prof(), prof(dram=6.0e12, pid="base")
    v = verdict(check_profile("run abc", run, base))
    assert not v.ok
    (f,) = v.failures
    assert f.ceiling == "B dram" and f.value == 3e12 and f.reference == 6e12
    assert "3000 GB/s" in f.text() and "6000 GB/s" in f.text() and "baseline base" in f.text()
    assert verdict(check_profile("run", run, prof(dram=3.1e12))).ok  # 3.2% short: inside 5%
    assert not verdict(check_profile("run", run, prof(dram=3.1e12), tolerance=0.01)).ok
    assert not verdict(check_profile("run", run, prof(launch=4e-6))).ok  # a slower launch floor


def test_check_bad_input():
    assert tolerance_problem(1.0) and tolerance_problem(-0.1) and tolerance_problem(0.05) is None
    empty = DeviceProfile("e", "e", "measured", {}, {})
    with pytest.raises(CheckError):
        verdict(check_profile("run", prof(), empty))


def test_check_fleet_holds_each_row_to_the_median():
    rep = fleet_report([member(0), member(1), member(2, bf16=600e12)])
    v = verdict(check_fleet(rep, None))
    assert [(r.subject.split()[1], r.ceiling, r.against) for r in v.failures] == [("2", "F bf16-tc", "peers' median")]
    assert set(ceiling_values(prof())) == {"B dram", "F bf16-tc", "launch"}


@pytest.mark.parametrize("share, fine", [(0.91, True), (0.89, False)])
def test_the_fleet_report_and_check_give_one_answer_for_a_member(share, fine):
    """One rule: the report said "no straggler" for a member at 0.91× its peers' median while check failed it
    (5% tolerance against the median); at 0.89× both must fail it, on the same ceiling, naming the same rule."""
    from rooftop.models.fleet import peer_rule

    rep = fleet_report([member(0), member(1), member(2, dram=share * 3e12), member(3)])
    v = verdict(check_fleet(rep, None))
    flagged = [(f.rank, f.ceiling) for f in rep.stragglers]
    failed = [(int(r.subject.split()[1]), r.ceiling) for r in v.failures]
    assert flagged == failed == ([] if fine else [(2, "B dram")])
    assert v.ok is fine
    peers = [r for r in v.results if r.against == "peers' median"]
    assert peers and all(r.rule == f"the straggler rule: {peer_rule()}" for r in peers)
    if not fine:
        assert peer_rule() in rep.stragglers[0].text and "0.89×" in v.failures[0].text()


def test_a_slow_launch_floor_is_one_answer_too():
    rep = fleet_report([member(0), member(1), member(2, launch=5e-6 / 0.89)])
    assert [(f.rank, f.ceiling) for f in rep.stragglers] == [(2, "launch")]
    assert [(r.subject.split()[1], r.ceiling) for r in verdict(check_fleet(rep, None)).failures] == [("2", "launch")]
    rep = fleet_report([member(0), member(1), member(2, launch=5e-6 / 0.91)])
    assert not rep.stragglers and verdict(check_fleet(rep, None)).ok


def test_a_stopped_member_is_kept_and_shown_but_no_peer():
    """A member a stop ended measured part of its plan: its figures are no straggler's, and set no median."""
    stopped = Member(2, "node0", "cuda:2", "NVIDIA H100", prof(dram=1.0e12), status="cancelled",
                     error="stopped by SIGTERM after 12 points")
    rep = fleet_report([member(0), member(1, dram=2.9e12), stopped])
    assert not rep.stragglers and rep.groups[0].median["B dram"] == pytest.approx(2.95e12)
    (flag,) = [f for f in rep.flags if f.rank == 2]
    assert flag.kind == "cancelled" and "stopped by SIGTERM after 12 points" in flag.text and "kept" in flag.text
    v = verdict(check_fleet(rep, None))
    assert {r.subject.split()[1] for r in v.results} == {"0", "1"}


def test_a_member_without_a_result_or_a_model_joins_the_fleets_model():
    """A rank lost before it named its device was headed "None: 2 members"."""
    lost = member_from_dict({"rank": 1, "host": "node0", "device": "", "model": None, "status": "lost",
                             "error": "its process ended"}, None)
    assert lost.model == "" and lost.label == "rank 1 (node0)"
    rep = fleet_report([member(0), lost])
    assert [(g.model, len(g.members)) for g in rep.groups] == [("NVIDIA H100", 2)]
    mixed = fleet_report([member(0), member(2, model="NVIDIA H200"), lost])
    assert sorted(g.model for g in mixed.groups) == ["NVIDIA H100", "NVIDIA H200", "device model unknown"]
