import dataclasses

import pytest

from loopwright.verify.compare import TestRow, Verdict
from loopwright.verify.findings import Finding
from loopwright.verify.verdict import NO_CHANGES, Facts, Verification, flaky_tests, judge
from loopwright.verify.web import WebCheck

FIXED = Verdict(True, (TestRow("t::a", "failed", "passed", "fixed"),), ())
BROKEN = Verdict(
    False,
    (TestRow("t::b", "passed", "failed", "broken"),),
    ("t::b passed before and fails now",),
)
HOLLOW = Verdict(False, (), ())
"""Not verified, yet with no reason given: the comparison's flag still decides."""
FINDING = Finding("tests/test_a.py", "removed_assertion", "an assertion was removed")
WEB_DOWN = WebCheck(ok=False, http_status=500, reason="the app answered 500 on /")
WEB_UP = WebCheck(ok=True, http_status=200)

CASES = [
    ("fixed, nothing else", Facts(comparison=FIXED), "verified", ()),
    ("a build with no problems", Facts(), "verified", ()),
    ("the web check passed", Facts(comparison=FIXED, web=WEB_UP), "verified", ()),
    ("no changes", Facts(comparison=FIXED, changed=False), "unverified", (NO_CHANGES,)),
    ("a test broke", Facts(comparison=BROKEN), "unverified", BROKEN.reasons),
    ("comparison failed silently", Facts(comparison=HOLLOW), "unverified", ()),
    (
        "setup failed",
        Facts(comparison=FIXED, problems=("the setup command `make` failed (exit 2)",)),
        "unverified",
        ("the setup command `make` failed (exit 2)",),
    ),
    (
        "a tamper finding",
        Facts(comparison=FIXED, findings=(FINDING,)),
        "unverified",
        ("tests/test_a.py: an assertion was removed",),
    ),
    (
        "the web check failed",
        Facts(comparison=FIXED, web=WEB_DOWN),
        "unverified",
        (WEB_DOWN.reason,),
    ),
    (
        "a new test fails",
        Facts(comparison=FIXED, new_tests_problem="tests/test_new.py fails"),
        "unverified",
        ("tests/test_new.py fails",),
    ),
    (
        "everything at once, in order",
        Facts(
            comparison=BROKEN,
            changed=False,
            problems=("setup failed",),
            findings=(FINDING,),
            web=WEB_DOWN,
            new_tests_problem="new tests fail",
        ),
        "unverified",
        (
            NO_CHANGES,
            *BROKEN.reasons,
            "setup failed",
            "tests/test_a.py: an assertion was removed",
            WEB_DOWN.reason,
            "new tests fail",
        ),
    ),
]


@pytest.mark.parametrize(
    ("facts", "status", "reasons"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_judge(facts, status, reasons):
    verification = judge(facts)
    assert verification == Verification(status, reasons)
    assert verification.verified is (status == "verified")


def test_a_verification_cannot_be_changed():
    with pytest.raises(dataclasses.FrozenInstanceError):
        judge(Facts()).status = "unverified"  # type: ignore[misc]


FLAKY = [
    ("reproduced", ["a", "b"], {"a": "failed", "b": "error"}, False, None),
    ("one recovered", ["a", "b"], {"a": "passed", "b": "failed"}, False, ("a",)),
    ("recovered, run not clean", ["a"], {"a": "passed", "c": "failed"}, False, ("a",)),
    ("vanished from a clean run", ["a", "b"], {}, True, ("a", "b")),
    ("missing from a failing run", ["a"], {"a": "missing"}, False, None),
    ("suite failed with no failing test, clean re-run", [], {}, True, ()),
    ("suite failed with no failing test, failed again", [], {}, False, None),
    ("recovered ones win over clean", ["a", "b"], {"b": "passed"}, True, ("b",)),
]


@pytest.mark.parametrize(
    ("failing", "rerun", "clean", "expected"), [c[1:] for c in FLAKY], ids=[c[0] for c in FLAKY]
)
def test_flaky_tests(failing, rerun, clean, expected):
    assert flaky_tests(failing, rerun, clean) == expected
