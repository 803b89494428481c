"""A fix whose patch holds bytes that are not UTF-8 (a Latin-1 file, a CRLF line) is saved,
applied and printed byte for byte: nothing is lost or re-encoded on the way."""

import subprocess
import sys

from tests.conftest import step, tool
from tests.scenarios import EDIT, FINISH, PLAN, model_env

LATIN1_LINE = b"caf\xe9\r\n"
SESSION = [
    step(PLAN),
    step(EDIT),
    step(tool("run_command", command="printf 'caf\\351\\r\\n' > notes.txt")),
    step(FINISH),
]


def test_a_patch_that_is_not_utf8_is_saved_and_applied_byte_for_byte(
    example_repo, scripted, run_cli, sandbox_kind, tmp_path
):
    repo = example_repo("python-invoice")
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(scripted(SESSION)))
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert (repo / "notes.txt").read_bytes() == LATIN1_LINE
    saved = tmp_path / "data" / "missions" / run.result["mission"] / "patch.diff"
    assert b"+" + LATIN1_LINE in saved.read_bytes()


def test_show_diff_on_a_pipe_prints_the_patch_byte_for_byte(example_repo, scripted, tmp_path):
    repo = example_repo("python-invoice")
    env = {
        "PATH": f"{subprocess.os.path.dirname(sys.executable)}:/usr/bin:/bin",
        "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        **model_env(scripted(SESSION)),
    }
    proc = subprocess.run(
        ["loopwright", "fix", str(repo), "--sandbox", "local", "--show-diff", "--dry-run"],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"+" + LATIN1_LINE in proc.stdout
    # What was printed is a patch git applies to the untouched tree.
    applied = subprocess.run(
        ["git", "apply", "--check", "-"], input=proc.stdout, cwd=repo, capture_output=True
    )
    assert applied.returncode == 0, applied.stderr
