"""Check every corpus task: its visible tests fail before the known fix and pass with it, and
its hidden tests pass with the fix (and fail before it).

    .venv/bin/python -m benchmarks.corpus.validate [--task ID ...] [--jobs 2] [--timeout 60]

Prints one row per task and exits 1 when any task is wrong, saying what is wrong. Every run
happens in a temporary copy; the task directories are never written to.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.corpus.tasks import (
    CORPUS,
    DEFAULT_TIMEOUT,
    TEST_CONFIG,
    TEST_DIRS,
    Judgement,
    Task,
    TaskError,
    TestRunner,
    WarmPytest,
    copy_tree,
    load_task,
    load_tasks,
)

SOURCE_SUFFIXES = (".py", ".js", ".mjs", ".cjs")
PRODUCT_LINES = (30, 200)
VISIBLE_TEST_FILES = (2, 6)


@dataclass
class TaskReport:
    """What validating one task found; `problems` is empty when the task is sound."""

    id: str
    language: str = "?"
    bug_class: str = "?"
    before: Judgement | None = None
    after: Judgement | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def is_test_path(rel: Path) -> bool:
    return rel.parts[0] in TEST_DIRS or rel.as_posix() in TEST_CONFIG


def source_files(repo: Path) -> list[Path]:
    return sorted(
        p.relative_to(repo)
        for p in repo.rglob("*")
        if p.is_file() and p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts
    )


def check_layout(task: Task) -> list[str]:
    """Problems with the task's files, found without running anything."""
    problems: list[str] = []
    if not task.repo.is_dir():
        return [f"{task.repo} is missing: put the buggy repository there"]
    if not task.fix_patch.is_file():
        problems.append(f"{task.fix_patch} is missing: save the known fix as a git diff")
    hidden = task.hidden_files() if task.hidden.is_dir() else []
    if not hidden:
        problems.append(f"{task.hidden} has no files: add the hidden tests")
    for rel in hidden:
        if not is_test_path(rel):
            problems.append(f"hidden/{rel} is not under {' or '.join(TEST_DIRS)}/")
        if (task.repo / rel).exists():
            problems.append(f"hidden/{rel} would overwrite repo/{rel}; give it another name")
    sources = source_files(task.repo)
    product = [p for p in sources if not is_test_path(p)]
    tests = [p for p in sources if is_test_path(p) and p.name not in TEST_CONFIG]
    lines = sum(len((task.repo / p).read_text(encoding="utf-8").splitlines()) for p in product)
    low, high = PRODUCT_LINES
    if not low <= lines <= high:
        problems.append(f"repo/ has {lines} lines of product code; keep it within {low}-{high}")
    low, high = VISIBLE_TEST_FILES
    if not low <= len(tests) <= high:
        problems.append(f"repo/ has {len(tests)} test files; keep it within {low}-{high}")
    if task.language == "node":
        package = task.repo / "package.json"
        if not package.is_file():
            problems.append("repo/package.json is missing")
        else:
            data = json.loads(package.read_text(encoding="utf-8"))
            if data.get("dependencies") or data.get("devDependencies"):
                problems.append("repo/package.json has dependencies; the sandbox cannot install")
    if task.fix_patch.is_file():
        for rel in task.fixed_files():
            if is_test_path(Path(rel)):
                problems.append(f"fix.patch changes {rel}; a fix may only change product code")
    return problems


def apply_fix(task: Task, tree: Path) -> str | None:
    """Apply the known fix to `tree`; the error text when it does not apply, else None."""
    ceiling = str(tree.parent)
    result = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(task.fix_patch)],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "HOME": ceiling, "GIT_CEILING_DIRECTORIES": ceiling},
        capture_output=True,
        text=True,
        timeout=30,
    )
    if result.returncode != 0:
        return result.stderr.strip() or f"git apply exited {result.returncode}"
    return None


def validate_task(
    task: Task, timeout: float = DEFAULT_TIMEOUT, runner: TestRunner | None = None
) -> TaskReport:
    started = time.monotonic()
    report = TaskReport(task.id, task.language, task.bug_class)
    report.problems = check_layout(task)
    if report.problems:
        report.seconds = time.monotonic() - started
        return report
    report.before = task.judge(task.repo, timeout, runner)
    if report.before.visible_ok:
        report.problems.append("the visible tests pass before the fix: they must show the bug")
    if report.before.hidden_ok:
        report.problems.append("the hidden tests pass before the fix: they must reach the bug")
    with tempfile.TemporaryDirectory(prefix=f"corpus-fix-{task.id}-") as tmp:
        fixed = Path(tmp) / "repo"
        copy_tree(task.repo, fixed)
        error = apply_fix(task, fixed)
        if error is not None:
            report.problems.append(f"fix.patch does not apply to repo/: {error}")
        else:
            report.after = task.judge(fixed, timeout, runner)
            if not report.after.visible_ok:
                report.problems.append("the visible tests fail with the fix")
            if not report.after.hidden_ok:
                report.problems.append("the hidden tests fail with the fix")
    report.seconds = time.monotonic() - started
    return report


def validate(
    tasks: list[Task], jobs: int = 2, timeout: float = DEFAULT_TIMEOUT
) -> list[TaskReport]:
    with WarmPytest() as runner, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda t: validate_task(t, timeout, runner), tasks))


def _mark(judgement: Judgement | None) -> str:
    if judgement is None:
        return "-/-"
    visible = "pass" if judgement.visible_ok else "fail"
    return f"{visible}/{'pass' if judgement.hidden_ok else 'fail'}"


def render(reports: list[TaskReport]) -> str:
    width = max([len(r.id) for r in reports] + [4])
    rows = [
        f"{'task':<{width}}  {'lang':<6}  {'bug class':<17}  {'before':<9}  {'after':<9}  "
        f"{'time':>5}  result"
    ]
    for r in reports:
        rows.append(
            f"{r.id:<{width}}  {r.language:<6}  {r.bug_class:<17}  {_mark(r.before):<9}  "
            f"{_mark(r.after):<9}  {r.seconds:>4.1f}s  {'ok' if r.ok else 'FAIL'}"
        )
        rows += [f"{'':<{width}}  - {p}" for p in r.problems]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--task", action="append", default=[], help="validate only this task id")
    parser.add_argument("--jobs", type=int, default=2, help="tasks validated at once")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per run")
    parser.add_argument("--output", help="show the failing runs' output too", action="store_true")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus directory")
    args = parser.parse_args(argv)
    corpus: Path = args.corpus
    try:
        if args.task:
            missing = [t for t in args.task if not (corpus / t / "task.toml").is_file()]
            if missing:
                print(f"no such task: {', '.join(missing)} (see {corpus})", file=sys.stderr)
                return 2
            tasks = [load_task(corpus / t) for t in args.task]
        else:
            tasks = load_tasks(corpus)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    reports = validate(tasks, args.jobs, args.timeout)
    print("\n(before/after: visible/hidden tests)")
    print(render(reports))
    bad = [r for r in reports if not r.ok]
    if args.output:
        for r in bad:
            for label, j in (("before", r.before), ("after", r.after)):
                if j is not None:
                    print(f"\n== {r.id} {label}\n{j.output}")
    print(f"\n{len(reports) - len(bad)} of {len(reports)} tasks ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
