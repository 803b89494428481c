"""Missions that stay: every CLI run is stored, `missions` and `show` read it back, and
`loopwright serve` without App credentials is a dashboard over them."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import threading
import time

import httpx

from loopwright.cli.main import main
from loopwright.cli.wiring import wait_for_interrupt
from tests.conftest import SUITE_PATH, VENV_BIN, step, tool
from tests.integration.app_harness import ServeProcess
from tests.scenarios import CORRECT, FIX_NEW, PLAN, model_env


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_fix_without_serve_is_listed_shown_and_on_the_local_dashboard(
    tmp_path, example_repo, scripted, run_cli, capsys
):
    repo = example_repo("python-invoice")
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(scripted(CORRECT)))
    assert run.exit_code == 0, run.stderr
    mission_id = run.result["mission"]

    code, out, _ = _cli(capsys, "missions", "--json")
    assert code == 0
    (row,) = json.loads(out)["missions"]
    assert row["id"] == mission_id
    assert row["status"] == "verified"
    assert row["repo"] == str(repo.resolve())
    assert row["kind"] == "fix"
    assert row["cost_usd"] == run.result["cost_usd"]

    code, out, _ = _cli(capsys, "missions")
    header, line = out.splitlines()
    assert header.split() == ["ID", "KIND", "STATUS", "COST", "AGE", "REPO"]
    assert line.split()[:3] == [mission_id, "fix", "verified"]
    assert line.endswith(str(repo.resolve()))

    code, out, _ = _cli(capsys, "show", mission_id)
    assert code == 0
    assert "status:     verified" in out
    assert "test_line_with_percentage_discount" in out and "fixed" in out
    assert f"+{FIX_NEW.rstrip()}" in out  # the diff
    assert "● verify" in out  # the event log, rendered as the terminal shows it

    code, out, _ = _cli(capsys, "show", mission_id, "--events")
    stored = [json.loads(line) for line in out.splitlines()]
    assert stored == run.events  # the same events --events FILE wrote, in order

    # `loopwright serve` with only a data directory: a dashboard over the same store.
    env = {
        "PATH": f"{SUITE_PATH}:{os.environ['PATH']}",
        "LOOPWRIGHT_DATA_DIR": os.environ["LOOPWRIGHT_DATA_DIR"],
    }
    server = ServeProcess(env, tmp_path / "serve.log").start()
    try:
        page = httpx.get(f"{server.url}/", timeout=10)
        listed = httpx.get(f"{server.url}/api/missions", timeout=10).json()
        webhook = httpx.post(f"{server.url}/webhooks/github", content=b"{}", timeout=10)
        mission_page = httpx.get(f"{server.url}/missions/{mission_id}", timeout=10)
        rebound = httpx.get(
            f"{server.url}/api/missions", headers={"Host": "rebind.example"}, timeout=10
        )
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "local dashboard" in log and "no webhook endpoint" in log
    assert page.status_code == 200
    assert mission_id in page.text
    assert "no webhook endpoint" in page.text
    assert [m["id"] for m in listed] == [mission_id]
    assert listed[0]["status"] == "verified"
    assert webhook.status_code in (404, 405)
    assert mission_page.status_code == 200 and "no webhook endpoint" in mission_page.text
    assert rebound.status_code == 421 and mission_id not in rebound.text  # DNS rebinding


def test_fix_serve_keeps_serving_after_the_mission_until_ctrl_c(
    tmp_path, example_repo, scripted, monkeypatch, capsys
):
    repo = example_repo("python-invoice")
    server = scripted([step(PLAN), step(tool("finish", summary="done"))])
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWRIGHT_")}
    env.update(model_env(server), PATH=f"{SUITE_PATH}:{os.environ['PATH']}")
    env["LOOPWRIGHT_DATA_DIR"] = str(data)
    env["PYTHONFAULTHANDLER"] = "1"  # a hang below ends with every thread's stack in the log
    log = tmp_path / "fix.log"
    terminal, stdin = pty.openpty()  # a terminal on stdin, as when a person runs it
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [f"{VENV_BIN}/loopwright", "fix", str(repo), "--sandbox", "local", "--serve", "--json"],
            stdin=stdin, stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    os.close(stdin)
    try:
        deadline = time.monotonic() + 240
        while "keeps serving until you press Ctrl-C" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        url = re.search(r"watch this mission at (\S+)", log.read_text()).group(1)
        page = httpx.get(url, timeout=10)  # the mission is over; its view is still up
        # --json's one object is out before the wait for Ctrl-C, not held back by it
        assert '"status": "unverified"' in log.read_text()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            proc.wait(10)
            raise AssertionError(f"no exit 60 s after Ctrl-C:\n{log.read_text()[-6000:]}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(terminal)
    assert page.status_code == 200
    assert code == 1  # not verified; Ctrl-C after the mission is not an interruption
    mission_id = url.rsplit("/", 1)[-1]
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(data))
    code, out, _ = _cli(capsys, "show", mission_id, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["status"] == "unverified"
    assert "no changes" in shown["result"]["message"]
    assert shown["events"][-1]["type"] == "done"


def test_show_of_an_unknown_id_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(tmp_path / "data"))
    code, out, err = _cli(capsys, "show", "0123456789ab")
    assert code == 2
    assert out == ""
    assert "no mission '0123456789ab'" in err and "loopwright missions" in err
    code, _, err = _cli(capsys, "show", "../../etc/passwd")
    assert code == 2 and "no mission" in err


def test_missions_on_an_empty_store_says_how_to_start(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(tmp_path / "data"))
    code, out, _ = _cli(capsys, "missions")
    assert code == 0 and "no missions yet" in out
    code, out, _ = _cli(capsys, "missions", "--json")
    assert json.loads(out) == {"missions": []}


def test_a_build_is_kept_as_a_build(tmp_path, scripted, run_cli, capsys):
    server = scripted([step(tool("finish", summary="nothing written"))])
    out = tmp_path / "app"
    run = run_cli(
        "build", "A calculator", "--out", str(out), "--sandbox", "local", env=model_env(server)
    )
    assert run.result is not None and run.result["status"] != "verified"
    _, listed, _ = _cli(capsys, "missions", "--json")
    (row,) = json.loads(listed)["missions"]
    assert (row["id"], row["kind"]) == (run.result["mission"], "build")
    assert row["status"] == run.result["status"]
    assert row["repo"] == str(out.resolve())


def test_wait_for_interrupt_returns_on_sigterm():
    before = signal.getsignal(signal.SIGTERM)
    sent = threading.Event()

    def terminate_once_it_listens() -> None:
        while signal.getsignal(signal.SIGTERM) is before:
            time.sleep(0.01)
        sent.set()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_once_it_listens, daemon=True).start()
    wait_for_interrupt()
    assert sent.is_set()  # it returned because of the signal, not before it
    assert signal.getsignal(signal.SIGTERM) is before  # the handler was put back


def test_serve_with_half_the_app_settings_is_a_usage_error(tmp_path, monkeypatch, capsys):
    for key in list(os.environ):
        if key.startswith("LOOPWRIGHT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LOOPWRIGHT_WEBHOOK_SECRET", "a-webhook-secret-0123456789")
    code, _, err = _cli(capsys, "serve", "--port", "1")
    assert code == 2
    assert "LOOPWRIGHT_GITHUB_APP_ID" in err and "LOOPWRIGHT_WEBHOOK_SECRET" not in err


def test_a_data_dir_that_is_a_file_is_named_in_the_error(tmp_path, monkeypatch, capsys):
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("")
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(not_a_dir))
    code, out, err = _cli(capsys, "missions")
    assert code == 2 and out == ""
    assert f"cannot open the missions store in {not_a_dir}" in err
    assert "LOOPWRIGHT_DATA_DIR" in err


def test_a_kept_mission_stores_no_secret_the_model_quotes_nor_url_credentials(
    tmp_path, example_repo, scripted, run_cli, capsys, monkeypatch
):
    """What `show` and the dashboard serve is redacted like the events: a token the model
    quotes in its summary, title or plan is masked, and a git URL is kept without its
    user and password."""
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    repo = example_repo("python-invoice")
    server = scripted(
        [
            step(tool("update_plan", items=[{"step": f"use {token}", "status": "done"}])),
            step(tool("finish", summary=f"the key is {token}", title=f"Leak {token}")),
        ]
    )
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    assert run.result is not None and run.result["status"] == "unverified", run.stderr
    code, out, _ = _cli(capsys, "show", run.result["mission"], "--json")
    assert code == 0
    assert token not in out and "[REDACTED]" in json.loads(out)["result"]["summary"]

    from loopwright.missions.log import cli_request

    stored = cli_request("https://alice:hunter2@127.0.0.1:9/o/r.git", "m1")
    assert "hunter2" not in f"{stored.repo} {stored.clone_url} {stored.dedupe_key}"
    assert stored.repo == "https://127.0.0.1:9/o/r.git"
