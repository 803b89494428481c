"""Documents nested deeper than their parser recurses, as a hostile repository, test run or
model can write them: each reader says it cannot read one, as it says for any malformed
document, instead of raising `RecursionError` out of the mission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwright.config import ConfigError
from loopwright.jsonshape import nests_within
from loopwright.repo_config import RepoConfig, parse_repo_config
from loopwright.verify.detect import DetectionError, detect_tests
from loopwright.verify.reports import MAX_SUITE_DEPTH, ReportError, parse_go_json, parse_junit
from loopwright.verify.testfiles.base import read_base_config
from loopwright.verify.testfiles.formats import MAX_NESTING, json_object, toml_table
from loopwright.verify.testfiles.sections import package_change, pyproject_change
from loopwright.verify.web import find_app

LEVELS = 100_000
DEEP_JSON = "[" * LEVELS + "]" * LEVELS
DEEP_TOML = "a = " + "[" * LEVELS + "]" * LEVELS + "\n"
DEEP_YAML = "test_cmd: " + "[" * LEVELS + "]" * LEVELS + "\n"


def test_the_json_and_toml_readers_see_no_document() -> None:
    assert json_object(DEEP_JSON) is None
    assert json_object('{"scripts": ' + DEEP_JSON + "}") is None
    assert toml_table(DEEP_TOML) == {}


def test_a_repository_config_nested_too_deep_is_a_config_error_naming_the_file() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_repo_config(DEEP_YAML, ".loopwright.yml")
    assert str(refused.value) == ".loopwright.yml nests too deeply to be read as YAML"


def test_detection_reads_a_package_json_nested_too_deep_as_it_reads_an_invalid_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "package.json").write_text('{"scripts": ' + DEEP_JSON + "}")
    with pytest.raises(DetectionError) as deep:
        detect_tests(tmp_path)
    (tmp_path / "package.json").write_text('{"scripts": [}')
    with pytest.raises(DetectionError) as invalid:
        detect_tests(tmp_path)
    assert str(deep.value) == str(invalid.value)
    assert find_app(tmp_path, RepoConfig()) is None


def test_detection_goes_past_a_pyproject_nested_too_deep(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(DEEP_TOML)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    plan = detect_tests(tmp_path)
    assert plan.reason == "found tests/test_x.py → python -m pytest"


def test_a_package_json_start_script_of_a_readable_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"start": "node s.js"}}))
    app = find_app(tmp_path, RepoConfig())
    assert app is not None


def junit(levels: int) -> str:
    opened = "".join(f'<testsuite name="s{i}">' for i in range(levels))
    return (
        f'<testsuites>{opened}<testcase classname="test" name="deep"/>{"</testsuite>" * levels}'
        '<testsuite name="after"><testcase classname="test" name="last"/></testsuite></testsuites>'
    )


def test_a_junit_report_nesting_suites_at_the_limit_is_read_in_order() -> None:
    """`node --test` names a test by its suites: every one of them is kept, in order, and
    a case after the deep one still comes after it."""
    results = parse_junit(junit(MAX_SUITE_DEPTH))
    names = " > ".join(f"s{i}" for i in range(MAX_SUITE_DEPTH))
    assert [(r.id, r.outcome) for r in results] == [
        (f"{names} > deep", "passed"),
        ("after > last", "passed"),
    ]


@pytest.mark.parametrize("levels", [MAX_SUITE_DEPTH + 1, 5_000])
def test_a_junit_report_nesting_suites_deeper_is_a_report_error(levels: int) -> None:
    with pytest.raises(ReportError) as refused:
        parse_junit(junit(levels))
    assert str(refused.value) == (
        f"the JUnit report nests test suites more than {MAX_SUITE_DEPTH} deep"
    )


def test_a_go_json_line_nested_too_deep_is_skipped_like_any_line_that_is_not_an_event() -> None:
    event = {"Action": "pass", "Package": "example.com/p", "Test": "TestA"}
    text = "{" + '"x": ' * 1 + DEEP_JSON + "}\n" + json.dumps(event) + "\n"
    assert [(r.id, r.outcome) for r in parse_go_json(text)] == [("example.com/p::TestA", "passed")]


DOTTED = "[x]\n" + ".".join(["a"] * 5_000) + " = 1\n"  # tomllib builds this without recursing


def test_a_pyproject_whose_dotted_key_nests_deep_is_judged_as_unreadable() -> None:
    """Its tables were copied and compared recursively, which raised `RecursionError` out
    of verification. Now both its test and install sections count as changed."""
    old = "[tool.pytest.ini_options]\naddopts = '-q'\n"
    for before, after in ((old, old + DOTTED), (old + DOTTED, old + DOTTED + "y = 2\n")):
        test_config, dependency, product = pyproject_change(before, after)
        assert test_config == dependency
        assert test_config == [
            "pyproject.toml is not valid TOML (or nests too deeply to read), so its test and "
            "install sections cannot be told apart"
        ]
        assert product is False
    assert toml_table(DOTTED) == {}
    assert toml_table("[x]\n" + ".".join(["a"] * (MAX_NESTING - 1)) + " = 1\n") != {}


def test_a_package_json_nested_past_the_limit_is_judged_as_unreadable() -> None:
    nested = '{"scripts": {"test": "node --test"}, "x": ' + "[" * 900 + "]" * 900 + "}"
    test_config, dependency, _product = package_change('{"scripts": {}}', nested)
    assert test_config == dependency
    assert "nests too deeply to read" in test_config[0]
    assert json_object('{"a": ' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}")


@pytest.mark.parametrize(
    ("value", "levels"),
    [("x", 0), ({}, 1), ([], 1), ({"a": [1]}, 2), ([[[]]], 3), ({"a": {"b": ({"c": 1},)}}, 4)],
)
def test_nests_within_counts_levels_of_objects_and_arrays(value: object, levels: int) -> None:
    assert nests_within(value, levels)
    assert levels == 0 or not nests_within(value, levels - 1)


def test_nests_within_walks_a_value_deeper_than_python_recurses() -> None:
    value: list[object] = []
    for _ in range(100_000):
        value = [value]
    assert not nests_within(value, 5_000)
    assert nests_within(value, 100_001)


def test_a_test_script_nesting_node_options_a_thousand_times_is_read_in_a_loop() -> None:
    """`node_preloads` called itself once per nested `NODE_OPTIONS=`: 1,000 of them in a
    repository's scripts.test raised `RecursionError` out of verification."""
    script = "NODE_OPTIONS=" * 1000 + "--require=./setup.js jest"
    files = {"package.json": json.dumps({"scripts": {"test": script}}), "setup.js": ""}
    config = read_base_config(list(files), files.get, test_command=None, setup_command=None)
    assert "setup.js" in config.preload_paths


@pytest.mark.parametrize("text", ["tool = 1\n", "tool = [1]\n", "project = 'x'\n"])
def test_a_pyproject_whose_tables_are_other_types_reads_as_having_none(
    tmp_path: Path, text: str
) -> None:
    """`tool = 1` made detection and the test-configuration reader call `.get` on an int."""
    (tmp_path / "pyproject.toml").write_text(text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    assert detect_tests(tmp_path).reason.startswith("found tests/test_x.py → ")
    files = {"pyproject.toml": text}
    config = read_base_config(list(files), files.get, test_command=None, setup_command=None)
    assert config.plugin_paths == frozenset()
