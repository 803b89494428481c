import pytest

from loopwright.agent.escalation import EscalationPolicy

F, S, N = "failure", "success", "neutral"


@pytest.mark.parametrize(
    ("signals", "after", "tiers_seen"),
    [
        ([F, F], 3, ["nano", "nano", "nano"]),
        ([F, F, F], 3, ["nano", "nano", "nano", "super"]),
        ([F, F, S, F, F], 3, ["nano"] * 6),
        ([F, N, F, N, F], 3, ["nano"] * 5 + ["super"]),
        ([F, F, F, F, F, F], 3, ["nano", "nano", "nano", "super", "super", "super", "ultra"]),
        ([F] * 12, 3, ["nano"] * 3 + ["super"] * 3 + ["ultra"] * 7),
        ([F, S, F, S], 1, ["nano", "super", "super", "ultra", "ultra"]),
        ([N] * 10, 1, ["nano"] * 11),
    ],
    ids=[
        "two-failures-stay",
        "three-failures-escalate",
        "success-resets",
        "neutral-neither-counts-nor-resets",
        "second-escalation",
        "top-tier-is-kept",
        "escalate-after-one",
        "reads-never-escalate",
    ],
)
def test_escalation_sequences(signals, after, tiers_seen):
    policy = EscalationPolicy(["nano", "super", "ultra"], after)
    seen = [policy.current]
    for signal in signals:
        policy.record(signal)
        seen.append(policy.current)
    assert seen == tiers_seen


def test_switch_carries_from_to_and_reason():
    policy = EscalationPolicy(["nano", "super"], 2)
    assert policy.record("failure", "run_command failed") is None
    switch = policy.record("failure", "run_command failed")
    assert switch is not None
    assert (switch.from_tier, switch.to_tier) == ("nano", "super")
    assert "2 consecutive failures" in switch.reason
    assert "run_command failed" in switch.reason
    assert policy.record("failure") is None and policy.record("failure") is None


@pytest.mark.parametrize(("tiers", "after"), [([], 3), (["a"], 0)])
def test_invalid_policies_are_rejected(tiers, after):
    with pytest.raises(ValueError):
        EscalationPolicy(tiers, after)
