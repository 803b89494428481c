"""Pair mode judges the whole change when the model finishes: files a command changed
without its text showing it (an interpreter's write under `ask_paths`, a bulk delete by
`find -delete`, a file outside the fix's scope) wait for a person, and what a person
already approved, in that very state, is not asked again.

The loop, model and sandbox are the in-process fakes of `test_pair_loop`; commands change
the sandbox's files through `on_exec`, and the change is a real git-format patch of those
files against the base, read by the product's own parser.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

import pytest

from loopwright.agent.change_review import ChangeReview, sections
from loopwright.agent.loop import AgentLoop
from loopwright.agent.pair import Decision
from loopwright.agent.policy import AskRules
from loopwright.events import EventList
from loopwright.sandbox.workspace import MAX_PATCH_BYTES, PatchTooLarge
from tests.unit.test_agent_loop import ScriptedModel, finish, run
from tests.unit.test_pair_loop import NetworkSandbox, QueuePair
from tests.unit.test_pair_loop import make as make_loop

BASE = {
    "invoice/totals.py": b"def total():\n    return 1\n",
    "tests/test_totals.py": b"from invoice.totals import total\n",
    "migrations/0001.sql": b"create table a;\n",
    **{f"static/img{n}.png.txt": b"pixels\n" for n in range(5)},
}
SCOPE = frozenset({"invoice/totals.py", "tests/test_totals.py"})
RULES = AskRules(ask_paths=("migrations/**",))


def git_patch(base: dict[str, bytes], files: dict[str, bytes]) -> str:
    """`git diff` of `files` against `base`, as git writes it for text files."""
    out = []
    for path in sorted(set(base) | set(files)):
        old, new = base.get(path), files.get(path)
        if old == new:
            continue
        head = [f"diff --git a/{path} b/{path}\n"]
        if old is None:
            head.append("new file mode 100644\n")
        elif new is None:
            head.append("deleted file mode 100644\n")
        body = difflib.unified_diff(
            (old or b"").decode().splitlines(keepends=True),
            (new or b"").decode().splitlines(keepends=True),
            f"a/{path}" if old is not None else "/dev/null",
            f"b/{path}" if new is not None else "/dev/null",
        )
        out.append("".join(head) + "".join(body))
    return "".join(out)


def make(
    turns: list[list[tuple[str, dict[str, str]]]],
    decisions: list[Decision],
    effects: dict[str, Callable[[dict[str, bytes]], None]],
    *,
    rules: AskRules = RULES,
    review: bool = True,
) -> tuple[AgentLoop, EventList, ScriptedModel, QueuePair]:
    sandbox = NetworkSandbox()
    sandbox.files.update(BASE)
    sandbox.on_exec = lambda command: effects.get(command, lambda _: None)(sandbox.files)
    model = ScriptedModel(turns)
    pair = QueuePair(decisions)
    changes = ChangeReview(lambda: git_patch(BASE, sandbox.files), rules, SCOPE)
    loop, events, _ = make_loop(
        model, pair, rules=rules, sandbox=sandbox, review=changes if review else None
    )
    return loop, events, model, pair


def write(path: str, data: bytes) -> Callable[[dict[str, bytes]], None]:
    return lambda files: files.__setitem__(path, data)


SNEAKY = "python3 -c \"open('migrations/0001.sql','w').write('drop table a;')\""
FIX = write("invoice/totals.py", b"def total():\n    return 2\n")


def test_an_interpreters_write_under_ask_paths_waits_at_finish_and_a_reject_sends_it_back():
    revert = write("migrations/0001.sql", BASE["migrations/0001.sql"])
    effects = {SNEAKY: write("migrations/0001.sql", b"drop table a;\n"), "git checkout .": revert}
    turns = [[run(SNEAKY)], [finish()], [run("git checkout .")], [finish()]]
    loop, events, model, _ = make(
        turns, [Decision("reject", "@lead", "no schema changes")], effects
    )
    assert loop.run().outcome == "finished"
    (asked,) = events.of_type("approval_requested")
    assert asked.fields["tool"] == "finish" and asked.fields["rule"] == "ask_path"
    assert "migrations/0001.sql: under ask_paths `migrations/**`" in asked.fields["why"]
    assert "+drop table a;" in asked.fields["diff"]
    seen = model.requests[2].last_tool_result()
    assert seen.startswith("Refused (rejected): not finished.")
    assert "migrations/0001.sql" in seen and "no schema changes" in seen
    # The first finish did not end the loop; the second, with the change undone, did.
    assert [e.fields["status"] for e in events.of_type("tool_result")][:2] == ["ok", "refused"]
    assert len(model.requests) == 4


def test_approving_the_finish_ends_the_loop_with_the_change():
    effects = {SNEAKY: write("migrations/0001.sql", b"drop table a;\n")}
    loop, events, model, _ = make(
        [[run(SNEAKY)], [finish()]], [Decision("approve", "@lead")], effects
    )
    result = loop.run()
    assert (result.outcome, result.summary) == ("finished", "Fixed it.")
    assert len(events.of_type("approval_requested")) == 1
    assert len(model.requests) == 2


def test_a_bulk_delete_by_find_waits_with_every_deleted_file_named():
    command = "find static -name '*.txt' -delete"

    def delete(files: dict[str, bytes]) -> None:
        for path in [p for p in files if p.startswith("static/")]:
            del files[path]

    loop, events, _, _ = make(
        [[run(command)], [finish()]], [Decision("approve", "terminal")], {command: delete}
    )
    loop.run()
    (asked,) = events.of_type("approval_requested")
    assert asked.fields["rule"] == "removals"
    assert "5 files deleted or renamed; more than 3 ask first" in asked.fields["why"]
    assert asked.fields["what"] == (
        "Finish with the changes to static/img0.png.txt, static/img1.png.txt, "
        "static/img2.png.txt and 2 more"
    )


def test_a_file_outside_the_fixs_scope_waits_and_one_inside_does_not():
    effects = {"fix": FIX, "note": write("docs/notes.md", b"why\n")}
    loop, events, _, _ = make([[run("fix")], [finish()]], [], effects)
    assert loop.run().outcome == "finished"
    assert events.of_type("approval_requested") == []
    loop, events, _, _ = make(
        [[run("fix"), run("note")], [finish()]], [Decision("approve", "terminal")], effects
    )
    loop.run()
    (asked,) = events.of_type("approval_requested")
    assert asked.fields["rule"] == "scope"
    assert asked.fields["why"] == (
        "docs/notes.md: outside the files the failing tests and their imports reach"
    )
    assert "invoice/totals.py" not in asked.fields["diff"]


def test_what_a_person_approved_is_not_asked_again_unless_it_changed_after():
    edit = ("edit_file", {"path": "migrations/0001.sql", "old": "table a", "new": "table b"})
    later = write("migrations/0001.sql", b"create table c;\n")
    turns = [[edit], [finish()]]
    loop, events, _, _ = make(turns, [Decision("approve", "@lead")], {})
    loop.run()
    assert [e.fields["tool"] for e in events.of_type("approval_requested")] == ["edit_file"]
    turns = [[edit], [run("later")], [finish()]]
    loop, events, _, _ = make(
        turns, [Decision("approve", "@lead"), Decision("approve", "@lead")], {"later": later}
    )
    loop.run()
    first, second = events.of_type("approval_requested")
    assert (first.fields["tool"], second.fields["tool"]) == ("edit_file", "finish")
    assert "+create table c;" in second.fields["diff"]


def test_what_an_approved_command_changed_is_approved_with_it():
    install = "pip install requests && python3 -c 'regen()'"
    effects = {install: write("migrations/0002.sql", b"create table d;\n")}
    loop, events, _, _ = make([[run(install)], [finish()]], [Decision("approve", "@lead")], effects)
    loop.run()
    (asked,) = events.of_type("approval_requested")
    assert asked.fields["tool"] == "run_command"


def test_without_the_review_or_with_scope_off_finish_asks_nothing():
    effects = {SNEAKY: write("migrations/0001.sql", b"drop table a;\n")}
    loop, events, _, _ = make([[run(SNEAKY)], [finish()]], [], effects, review=False)
    assert loop.run().outcome == "finished"
    assert events.of_type("approval_requested") == []
    off = AskRules(outside_scope=False)
    loop, events, _, _ = make(
        [[run("note")], [finish()]], [], {"note": write("x.md", b"x\n")}, rules=off
    )
    assert loop.run().outcome == "finished"
    assert events.of_type("approval_requested") == []


def test_sections_split_a_patch_by_file_and_mark_deletions():
    patch = git_patch(BASE, {**BASE, "invoice/totals.py": b"x\n", "new.py": b"y\n"} | {})
    patch += git_patch({"gone.py": b"z\n"}, {})
    found = sections(patch)
    assert sorted(found) == ["gone.py", "invoice/totals.py", "new.py"]
    assert [found[p].deleted for p in sorted(found)] == [True, False, False]
    assert len({s.digest for s in found.values()}) == 3


def test_a_change_too_large_to_export_is_never_recorded_as_approved_nor_reviewed():
    """The export of a change over the size limit raises: the review records nothing as
    approved (an approval then covers no file) and `check` hands the refusal to `finish`
    rather than answering that nothing waits."""
    too_large = {"on": True}

    def export() -> str:
        if too_large["on"]:
            raise PatchTooLarge(MAX_PATCH_BYTES + 1)
        return git_patch(BASE, {**BASE, "migrations/0001.sql": b"drop table a;\n"})

    changes = ChangeReview(export, RULES, SCOPE)
    assert changes.state() == {}
    changes.approved({})
    with pytest.raises(PatchTooLarge):
        changes.check()
    too_large["on"] = False
    review = changes.check()
    assert review is not None and review.paths == ("migrations/0001.sql",)
