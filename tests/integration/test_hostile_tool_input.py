"""Tool arguments and files, from a hostile or confused model or repository, that the host
once could not handle: each is now an observation the model reads (or plain text in the
events), and the mission goes on to verify the fix.

Before, each ended the mission with a traceback out of the tool or an event sink:
`UnicodeDecodeError` (edit_file on a file that is not UTF-8), `UnicodeEncodeError` (a lone
surrogate, which JSON's `\\ud800` decodes to), `ValueError` (a NUL byte in a command), a
whole-file read with no size cap, or a name with bytes that are not UTF-8.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import init_repo, step, tool
from tests.integration.test_adversarial import hostile_session
from tests.scenarios import model_env

NOTHING = tool("run_command", command="true")
SURROGATE = "half of a surrogate pair, which is not a character"


@pytest.mark.parametrize(
    ("setup", "call", "status", "said"),
    [
        (
            tool("run_command", command=r"printf 'a\377b\n' > bad.txt"),
            tool("edit_file", path="bad.txt", old="a", new="c"),
            "error",
            "bad.txt is not UTF-8 text (byte 1), so edit_file cannot edit it",
        ),
        (NOTHING, tool("write_file", path="s.txt", content="x\ud800"), "error", SURROGATE),
        (NOTHING, tool("read_file", path="s\udcff.txt"), "error", SURROGATE),
        (NOTHING, tool("run_command", command="echo \ud800"), "error", SURROGATE),
        (NOTHING, tool("update_plan", items=[{"step": "x\ud800", "status": "done"}]), "error",
         SURROGATE),
        (NOTHING, tool("run_command", command="echo a\x00b"), "refused",
         "The command contains a NUL byte, which no command line can carry. Nothing was run."),
        (
            tool("run_command", command="head -c 10000001 /dev/zero > big.bin"),
            tool("read_file", path="big.bin"),
            "error",
            "big.bin is 10000001 bytes, more than the 10000000 bytes a file read may return",
        ),
        (NOTHING, tool("write_file", path="a/" * 300 + "f.txt", content="x"), "refused",
         "a path nested 300 directories deep (the limit is 256). Loopwright cannot verify or "
         "deliver such a path; choose a shorter one."),
    ],
    ids=["edit-not-utf8", "surrogate-content", "surrogate-path", "surrogate-command",
         "surrogate-plan", "nul-command", "read-too-big", "write-too-deep"],
)  # fmt: skip
def test_a_hostile_argument_or_file_is_an_observation_and_the_mission_goes_on(
    example_repo: Any, scripted: Any, run_cli: Any, setup: dict[str, Any],
    call: dict[str, Any], status: str, said: str,
) -> None:  # fmt: skip
    repo = example_repo("python-invoice")
    server = scripted(hostile_session(setup, call, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    result = run.of_type("tool_result")[2]  # after the plan's and the setup's
    assert (result["tool"], result["status"]) == (call["name"], status), result
    assert said in result["output"]
    assert run.result["status"] == "verified", run.result["message"]


def test_a_lone_surrogate_in_the_models_text_reaches_every_event_sink_as_text(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path
) -> None:
    """The events file, the terminal and the result take UTF-8 only: the half pair is
    written as U+FFFD."""
    repo = example_repo("python-invoice")
    steps = hostile_session(fix=True)
    steps[0] = step(*steps[0]["tool_calls"], content="Plan first \ud800 then fix.")
    server = scripted(steps)
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    assert run.result["status"] == "verified", run.result["message"]
    written = "".join(p.read_text(encoding="utf-8") for p in tmp_path.glob("events-*.ndjson"))
    assert "Plan first \ufffd then fix." in written


def test_a_repository_with_a_name_that_is_not_utf8_is_fixed(
    example_repo: Any, scripted: Any, run_cli: Any
) -> None:
    """The mission's fingerprint hashed names as UTF-8 text and raised on the first byte that
    was not, before the mission started."""
    repo = example_repo("python-invoice")
    (Path(os.fsdecode(os.fsencode(repo) + b"/bad\xffname.txt"))).write_text("x\n")
    os.symlink(os.fsdecode(b"target\xfe"), repo / "link")
    init_repo(repo)
    server = scripted(hostile_session(fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    assert run.result["status"] == "verified", run.result["message"]
    assert json.dumps(run.result)  # the result is text


LINKED_WORKFLOW = tool(
    "run_command",
    command=(
        "python3 -c \"import os; os.makedirs(b'.github/workflows', exist_ok=True); "
        "open(b'.github/workflows/caf\\xe9.yml', 'wb').write(b'x'); "
        "os.symlink(b'.github/workflows/caf\\xe9.yml', b'wf')\""
    ),
)


@pytest.mark.parametrize(
    "call",
    [tool("write_file", path="wf", content="y"), tool("run_command", command="echo y > wf")],
    ids=["write", "command"],
)
def test_a_refusal_quoting_a_name_that_is_not_utf8_reaches_the_model(
    example_repo: Any, scripted: Any, run_cli: Any, call: dict[str, Any]
) -> None:
    """A link to a protected file whose name is not UTF-8: the refusal names the file, with
    its undecodable byte, and the next request still goes out (the client encodes it as
    strict UTF-8, and refused it before), so the mission reaches its verdict."""
    repo = example_repo("python-invoice")
    server = scripted(hostile_session(LINKED_WORKFLOW, call, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    refused = run.of_type("tool_result")[2]
    assert refused["status"] == "refused"
    assert "through a symlink to .github/workflows/caf\ufffd.yml" in refused["output"]
    # The file the model planted under .github/workflows is in the patch: not verified.
    assert run.result["status"] == "unverified", run.result["message"]
    assert run.result["message"].startswith(".github/workflows/caf\ufffd.yml: ")
    assert "is a protected path" in run.result["message"]
    sent = server.requests[3]["messages"][-1]["content"]
    assert "caf\ufffd.yml" in sent


def nested(levels: int) -> str:
    """`update_plan` arguments whose items nest `levels` deep, as the JSON text the model
    sends (text here, so the script's own serialisation never walks the nesting)."""
    return '{"items": ' + "[" * levels + '"x"' + "]" * levels + "}"


@pytest.mark.parametrize("levels", [40, 500, 950])
def test_tool_arguments_nested_deep_are_refused_where_they_come_in(
    example_repo: Any, scripted: Any, run_cli: Any, levels: int
) -> None:
    """The tool-call event's redaction walked the arguments one frame a level (500 deep
    ended the mission), and the next request's check of the history parsed them again
    (950 deep). Now they are invalid arguments, said so in the event and to the model."""
    repo = example_repo("python-invoice")
    call = {"name": "update_plan", "arguments": nested(levels)}
    server = scripted(hostile_session(call, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    described = run.of_type("tool_call")[1]
    assert (described["args"], described["args_error"]) == ({}, "nested too deeply")
    result = run.of_type("tool_result")[1]
    assert result["status"] == "error"
    said = (
        "are not valid JSON (nested too deeply)"  # past what the JSON parser itself takes
        if levels == 950
        else "nest deeper than 32 levels. Send a JSON object matching the tool's schema."
    )
    assert said in result["output"]
    assert run.result["status"] == "verified", run.result["message"]
