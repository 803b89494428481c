"""Turn test-runner output (JUnit XML, `go test -json`, or just an exit code) into per-test results.

The verdict speaks in test ids, so every runner's report is reduced to the same `TestReport`.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from loopwright.clip import truncate_middle

Outcome = Literal["passed", "failed", "error", "skipped"]
ReportSource = Literal["stream", "junit", "go-json", "exit-code"]

SUITE_ID = "<suite>"
"""Id of the pseudo-test that stands for the whole run when there is no per-test data."""

MESSAGE_LIMIT = 4000
"""Characters of failure text kept per test; the full log is kept elsewhere."""

MAX_SUITE_DEPTH = 256
"""The deepest nesting of test suites a JUnit report may have (pytest writes one level,
node one per `describe`)."""

# When the same id is reported twice (a failure in the call and an error in teardown, or two
# node tests with the same name in different files), the worse outcome must win.
_SEVERITY: dict[Outcome, int] = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class ReportError(Exception):
    """A report could not be read safely; the message says why."""


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test, identified the way its runner names it."""

    __test__ = False  # not a pytest test class despite the name

    id: str
    outcome: Outcome
    message: str = ""


@dataclass(frozen=True)
class StreamEvidence:
    """What Loopwright's signed results stream showed for one run, and the report file beside it."""

    started: bool
    """A valid start record arrived: Loopwright's reporter was loaded and ran."""
    completed: bool
    """A valid completion record arrived: the runner reached the end of the suite."""
    status: int | None
    """The runner's exit status as the completion record gives it."""
    problems: tuple[str, ...] = ()
    """Forged, replayed, reordered or conflicting records, in words."""
    file_results: tuple[TestResult, ...] | None = None
    """The JUnit report written beside the stream, for the cross-check; None: none readable."""
    file_problem: str = ""
    """Why the report file could not be read, when it could not."""


@dataclass(frozen=True)
class TestReport:
    """Every test result of one run, plus the command's exit code."""

    __test__ = False

    results: tuple[TestResult, ...]
    exit_code: int
    source: ReportSource
    stream: StreamEvidence | None = None
    """Set when the results come from Loopwright's reporter (`source == "stream"`)."""

    def failing(self) -> set[str]:
        """Ids that failed or errored."""
        return {r.id for r in self.results if r.outcome in ("failed", "error")}

    def passing(self) -> set[str]:
        return {r.id for r in self.results if r.outcome == "passed"}

    def by_id(self) -> dict[str, TestResult]:
        return {r.id: r for r in self.results}


def parse_junit(xml_text: str) -> list[TestResult]:
    """Per-test results from JUnit XML as written by pytest (`--junitxml`) or `node --test`.

    Raises `ReportError` for malformed XML and for any DOCTYPE or entity declaration, which a
    test run has no business writing and which could expand into gigabytes (billion laughs).
    """
    # A cheap textual check first, then defusedxml itself (DTDs forbidden, entities and
    # external references refused), so an encoding trick cannot slip a declaration past the
    # string search.
    if re.search(r"<!\s*(DOCTYPE|ENTITY)", xml_text, re.IGNORECASE):
        raise ReportError(_DECLARATION_REFUSED)
    try:
        root = SafeET.fromstring(xml_text, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise ReportError(_DECLARATION_REFUSED) from exc
    except ET.ParseError as exc:
        raise ReportError(f"the JUnit report is not well-formed XML: {exc}") from exc
    flavour = _flavour(root)
    results: list[TestResult] = []
    _walk(root, flavour, results)
    return _merge(results)


def parse_go_json(text: str) -> list[TestResult]:
    """Per-test results from `go test -json` output; lines that are not JSON events are ignored.

    Ids are `package::TestName` (subtests keep Go's `TestName/sub` form). A package that fails
    without any failing test (a build error, a panic in TestMain) becomes one `error` result
    named after the package, so the failure is not lost.
    """
    outcome_of: dict[str, Outcome] = {}
    output: dict[str, list[str]] = {}
    failed_packages: list[str] = []
    failing_packages_with_tests: set[str] = set()
    for line in text.splitlines():
        event = _json_object(line)
        if event is None:
            continue
        action = event.get("Action")
        package = str(event.get("Package") or event.get("ImportPath") or "")
        test = event.get("Test")
        key = f"{package}::{test}" if test else package
        if action in ("output", "build-output"):
            output.setdefault(key, []).append(str(event.get("Output", "")))
            continue
        if not test:
            if action == "fail" and package not in failed_packages:
                failed_packages.append(package)
            continue
        if action in ("run", "pass", "fail", "skip"):
            outcome_of.setdefault(key, "passed")
            if action == "fail":
                outcome_of[key] = "failed"
                failing_packages_with_tests.add(package)
            elif action == "skip":
                outcome_of[key] = "skipped"
    results = [
        TestResult(key, outcome, _clip("".join(output.get(key, []))) if outcome != "passed" else "")
        for key, outcome in outcome_of.items()
    ]
    for package in failed_packages:
        if package not in failing_packages_with_tests:
            text_out = "".join(output.get(package, [])) or f"package {package} failed"
            results.append(TestResult(package, "error", _clip(text_out)))
    return results


def build_report(
    exit_code: int, junit_xml: str | None = None, go_json: str | None = None
) -> TestReport:
    """The report of one run: per-test results when a report has any, else one `<suite>` result.

    An unreadable report is not fatal: the run falls back to its exit code and the pseudo-test's
    message says why, so the verdict can still be reached (and explained).
    """
    problem = ""
    if junit_xml is not None and junit_xml.strip():
        try:
            results = parse_junit(junit_xml)
        except ReportError as exc:
            problem = str(exc)
        else:
            if results:
                return TestReport(tuple(results), exit_code, "junit")
            problem = "the JUnit report lists no tests"
    if go_json is not None and go_json.strip():
        go_results = parse_go_json(go_json)
        if go_results:
            return TestReport(tuple(go_results), exit_code, "go-json")
        problem = problem or "the go test -json output lists no tests"
    outcome: Outcome = "passed" if exit_code == 0 else "failed"
    message = problem or ("" if exit_code == 0 else f"the test command exited {exit_code}")
    return TestReport((TestResult(SUITE_ID, outcome, message),), exit_code, "exit-code")


_DECLARATION_REFUSED = "the JUnit report contains a DOCTYPE or ENTITY declaration; refused"


Flavour = Literal["pytest", "node", "generic"]


def _flavour(root: ET.Element) -> Flavour:
    cases = list(root.iter("testcase"))
    if cases and all(case.get("classname") == "test" and not case.get("file") for case in cases):
        return "node"
    suite_names = {root.get("name", "")} | {s.get("name", "") for s in root.iter("testsuite")}
    if suite_names & {"pytest", "pytest tests"}:
        return "pytest"
    if any(case.get("file", "").endswith(".py") for case in cases):
        return "pytest"
    return "generic"


def _walk(root: ET.Element, flavour: Flavour, out: list[TestResult]) -> None:
    """Each test case under `root` in document order, with the names of the suites it is
    nested in; without recursion, and refusing nesting no real report has (a test run
    controls what its report says)."""
    stack: list[tuple[Iterator[ET.Element], list[str]]] = [(iter(root), [])]
    while stack:
        children, suites = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
        elif child.tag == "testsuite":
            if len(suites) >= MAX_SUITE_DEPTH:
                raise ReportError(
                    f"the JUnit report nests test suites more than {MAX_SUITE_DEPTH} deep"
                )
            stack.append((iter(child), [*suites, child.get("name", "")]))
        elif child.tag == "testcase":
            out.append(_case_result(child, suites, flavour))


def _case_result(case: ET.Element, suites: list[str], flavour: Flavour) -> TestResult:
    name = case.get("name", "")
    classname = case.get("classname", "")
    if flavour == "node":
        test_id = " > ".join([s for s in suites if s] + [name])
    elif flavour == "pytest" or (classname and _DOTTED_NAME.match(classname)):
        test_id = _pytest_id(classname, name, case.get("file"))
    else:
        test_id = f"{classname}::{name}" if classname else name
    outcome: Outcome = "passed"
    message = ""
    if any(c.tag == "skipped" and c.get("type") == "todo" for c in case):
        # node's todo tests may fail without failing the run; its reporters call them todo.
        return TestResult(test_id, "skipped", "")
    for child in case:
        found: Outcome | None = {
            "failure": "failed",
            "error": "error",
            "skipped": "skipped",
        }.get(child.tag)  # type: ignore[assignment]
        if found is None or _SEVERITY[found] <= _SEVERITY[outcome]:
            continue
        outcome = found
        text = (child.text or "").strip()
        message = child.get("message", "") or text
        if text and text not in message:
            message = f"{message}\n{text}" if message else text
    return TestResult(test_id, outcome, _clip(message))


def _pytest_id(classname: str, name: str, file: str | None) -> str:
    """Rebuild pytest's node id (`tests/test_calc.py::TestCalc::test_add`) from JUnit fields."""
    if not classname:
        # A collection error: pytest puts the module's dotted path in `name`.
        if file:
            return file
        return _module_path(name.split(".")) if _DOTTED_NAME.match(name) else name
    parts = classname.split(".")
    if file:
        module = file.removesuffix(".py").replace("/", ".").split(".")
        if parts[: len(module)] == module:
            return "::".join([file, *parts[len(module) :], name])
        return "::".join([file, name])
    # Without `file` (xunit2), classes are the trailing capitalised components: Python
    # modules are lowercase by convention and pytest only collects classes named Test*.
    split = len(parts)
    while split > 1 and parts[split - 1][:1].isupper():
        split -= 1
    return "::".join([_module_path(parts[:split]), *parts[split:], name])


def _module_path(parts: Iterable[str]) -> str:
    return "/".join(parts) + ".py"


def _merge(results: list[TestResult]) -> list[TestResult]:
    merged: dict[str, TestResult] = {}
    for result in results:
        seen = merged.get(result.id)
        if seen is None or _SEVERITY[result.outcome] > _SEVERITY[seen.outcome]:
            merged[result.id] = result
    return list(merged.values())


def _json_object(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _clip(text: str) -> str:
    return truncate_middle(text, MESSAGE_LIMIT)
