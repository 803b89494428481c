"""The protected-path list is the repository's to configure (SECURITY.md check 20).

The real CLI, a scripted model and a real sandbox: a `protected_paths` list in the
repository's config replaces the default one, so the same fix is refused or delivered
depending only on the list, and a refused patch never reaches the working tree.
"""

from __future__ import annotations

from tests.conftest import git, step, tool
from tests.scenarios import CORRECT, EDIT, FINISH, FIX_NEW, PLAN, model_env

FIXED_FILE = "invoice/totals.py"
BY_SHELL = (
    "python -c \"import pathlib; p = pathlib.Path('invoice/totals.py'); "
    "p.write_text(p.read_text().replace('* line.discount_percent\\n', "
    "'* line.discount_percent / 100\\n'))\""
)
AROUND_THE_TOOL = [
    step(PLAN),
    step(EDIT),  # the file tool refuses a protected path
    step(tool("run_command", command=BY_SHELL)),  # a command can still write it
    step(tool("run_command", command="python -m pytest -q")),
    step(FINISH),
]


def test_a_configured_protected_path_refuses_an_otherwise_verified_fix(
    example_repo, scripted, run_cli, sandbox_kind
):
    repo = example_repo("python-invoice", {".loopwright.yml": 'protected_paths: ["invoice/**"]\n'})
    server = scripted(AROUND_THE_TOOL)
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))

    edits = [e for e in run.of_type("tool_result") if e["tool"] == "edit_file"]
    assert [e["status"] for e in edits] == ["refused"]
    assert FIX_NEW.strip() in run.result["patch"]
    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "unverified", run.result["message"]
    findings = run.result["verification"]["tamper"]
    assert [(f["kind"], f["path"]) for f in findings] == [("protected_path", FIXED_FILE)]
    assert "protected path" in run.result["message"]
    # The tests pass with the patch: only the configured list refuses it.
    rows = {r["id"]: r["status"] for r in run.result["verification"]["rows"]}
    assert rows["tests/test_totals.py::test_line_with_percentage_discount"] == "fixed"
    assert run.result["applied"] is False
    assert FIX_NEW not in (repo / FIXED_FILE).read_text()
    assert git("status", "--porcelain", "--untracked-files=all", cwd=repo) == ""


def test_a_list_without_the_path_lets_the_same_fix_through(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice", {".loopwright.yml": 'protected_paths: ["deploy/**"]\n'})
    server = scripted(CORRECT)
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))

    assert run.exit_code == 0, run.result["message"]
    assert run.result["status"] == "verified"
    assert run.result["verification"]["tamper"] == []
    assert FIX_NEW in (repo / FIXED_FILE).read_text()
