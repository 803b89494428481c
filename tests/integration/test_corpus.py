"""The bug corpus stays sound: every task's tests fail before its known fix and pass with it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.corpus.tasks import BUG_CLASSES, CORPUS, WarmPytest, load_tasks, run_tests
from benchmarks.corpus.validate import main, render, validate


def test_every_task_validates() -> None:
    tasks = load_tasks()
    reports = validate(tasks, jobs=2)
    assert [r.id for r in reports if not r.ok] == [], render(reports)
    assert len(tasks) >= 24
    languages = [t.language for t in tasks]
    assert languages.count("python") >= 16 and languages.count("node") >= 8
    assert set(BUG_CLASSES) <= {t.bug_class for t in tasks}


def test_judge_credits_only_product_changes(tmp_path: Path) -> None:
    """A patch that rewrites the visible tests or adds a conftest still fails the judge."""
    task = next(t for t in load_tasks() if t.id == "py-paginate")
    tree = tmp_path / "repo"
    shutil.copytree(task.repo, tree)
    (tree / "tests" / "test_paginator.py").write_text("def test_ok():\n    assert True\n")
    (tree / "conftest.py").write_text("collect_ignore_glob = ['tests/*']\n")
    judgement = task.judge(tree)
    assert not judgement.visible_ok and not judgement.hidden_ok
    assert "test_partial_last_page" in judgement.output
    assert (tree / "conftest.py").is_file()  # the judged tree itself is left alone


def test_validator_names_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "py-paginate"
    shutil.copytree(CORPUS / "py-paginate", broken)
    patch = (broken / "fix.patch").read_text()
    (broken / "fix.patch").write_text(patch.replace("-(-self.count // self.per_page)", "0"))
    assert main(["--corpus", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "the visible tests fail with the fix" in out
    assert "0 of 1 tasks ok" in out
    assert main(["--task", "no-such-task"]) == 2
    assert "no such task: no-such-task" in capsys.readouterr().err


def test_a_hanging_run_is_ended_at_its_timeout(tmp_path: Path) -> None:
    """Both runners kill the run's whole process group and say it timed out."""
    tree = tmp_path / "repo"
    (tree / "tests").mkdir(parents=True)
    (tree / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (tree / "tests" / "test_hang.py").write_text(
        "import subprocess, time\n\n"
        "def test_hang():\n"
        "    (subprocess.Popen(['sleep', '61.7']), time.sleep(60))\n"
    )
    (tree / "hang.test.js").write_text("setTimeout(() => {}, 60000);\n")
    with WarmPytest() as warm:
        for runner, command in ((warm, "python -m pytest"), (run_tests, "node --test")):
            # Waited out, the hanging test would pass after its 60 s sleep.
            result = runner(command, tree, 1.5)
            assert result.timed_out and not result.passed, result.output
            assert "timed out after 1.5s" in result.output
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 61.7" not in processes
