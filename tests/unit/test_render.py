"""What Loopwright posts on GitHub: content, injection from model text, and size limits."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopwright.github.command_text import parse_command
from loopwright.github.render import (
    CHECK_TEXT_LIMIT,
    CHECK_TITLE_LIMIT,
    COMMENT_LIMIT,
    PR_BODY_LIMIT,
    ZWJ,
    check_run_output,
    code,
    diffstat,
    explain_command_comment,
    fenced,
    fork_patch_comment,
    pr_body,
    pr_title,
    prose,
    refusal_comment,
    truncate,
)
from loopwright.redaction import MASK, Redactor

MISSION_URL = "https://loopwright.example/missions/a1b2c3d4e5f6"
SHOT_URL = "https://loopwright.example/missions/a1b2c3d4e5f6/screenshot.png"
PATCH = """\
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""

RESULT: dict[str, Any] = {
    "mission": "a1b2c3d4e5f6",
    "status": "verified",
    "message": "verified: the failing tests pass and nothing else broke",
    "summary": "Fixed the sign in add(): it subtracted instead of adding.",
    "patch": PATCH,
    "usage": {
        "nano": {"calls": 3, "prompt_tokens": 1000, "completion_tokens": 200, "cost_usd": 0.0012},
        "super": {"calls": 1, "prompt_tokens": 5000, "completion_tokens": 300, "cost_usd": 0.0031},
    },
    "cost_usd": 0.0043,
    "steps": 4,
    "verification": {
        "verified": True,
        "reasons": [],
        "rows": [
            {
                "id": "tests/test_calc.py::test_add",
                "before": "failed",
                "after": "passed",
                "status": "fixed",
            },
            {
                "id": "tests/test_calc.py::test_sub",
                "before": "passed",
                "after": "passed",
                "status": "ok",
            },
        ],
        "tamper": [],
        "commands": [
            {"phase": "before", "command": "pytest -q", "exit_code": 1},
            {"phase": "after", "command": "pytest -q", "exit_code": 0},
        ],
    },
    "plan": [
        {"step": "Reproduce the failure", "status": "done"},
        {"step": "Fix add()", "status": "done"},
        {"step": "Run the suite", "status": "in_progress"},
    ],
}


def result(**changes: Any) -> dict[str, Any]:
    value = copy.deepcopy(RESULT)
    value.update(changes)
    return value


def body(res: dict[str, Any] | None = None, redactor: Redactor | None = None, **kw: Any) -> str:
    return pr_body(
        res if res is not None else RESULT,
        mission_url=kw.pop("mission_url", MISSION_URL),
        screenshot_url=kw.pop("screenshot_url", SHOT_URL),
        redactor=redactor or Redactor(),
        **kw,
    )


# -- content -------------------------------------------------------------------------------


def test_pr_body_has_every_section() -> None:
    text = body()
    assert text.startswith("## ✅ Verified fix\n")
    assert "Fixed the sign in add\\(\\)" not in text  # parentheses are left alone
    assert "> Fixed the sign in add(): it subtracted instead of adding." in text
    assert "- [x] Reproduce the failure" in text
    assert "- [ ] Run the suite" in text
    assert "| test | before | after | status |" in text
    assert "| `tests/test_calc.py::test_add` | failed | passed | ✅ fixed |" in text
    assert "1 other test(s) passed before and after." in text
    assert "before: `pytest -q` exited 1" in text
    assert f"[Watch the mission live]({MISSION_URL})" in text
    assert f"![The app after the fix]({SHOT_URL})" in text
    assert "| nano | 3 | 1,200 | $0.0012 |" in text
    assert "| **total** | 4 | 6,500 | $0.0043 |" in text
    assert text.rstrip().endswith(
        f"<sub>Opened by Loopwright · mission `a1b2c3d4e5f6` · [live view]({MISSION_URL})</sub>"
    )


def test_pr_body_lists_the_changes_per_file() -> None:
    patch = (
        PATCH
        + "diff --git a/docs/@octocat.md b/docs/@octocat.md\nnew file mode 100644\n"
        + "--- /dev/null\n+++ b/docs/@octocat.md\n@@ -0,0 +1,2 @@\n+++ a line starting ++\n"
        + "+--- and one starting --\n"
        + "diff --git a/logo.png b/logo.png\nindex 1..2 100644\n"
        + "Binary files a/logo.png and b/logo.png differ\n"
    )
    text = body(result(patch=patch))
    section = text[text.index("### Changes") : text.index("### Verification")]
    assert "3 files changed, +3 -1:" in section
    assert "- `calc.py` (+1 -1)" in section
    # A path is an identifier: in a code span, so the `@` pings nobody.
    assert "- `docs/@octocat.md` (+2 -0)" in section
    assert "- `logo.png` (binary)" in section
    assert text.index("### Plan") < text.index("### Changes")
    assert "### Changes" not in body(result(patch=""))


def test_pr_body_of_a_patch_that_cannot_be_parsed_says_so() -> None:
    text = body(result(patch="--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n"))
    assert "### Changes" in text
    assert "could not be listed: malformed diff: Hunk is shorter than expected" in text
    assert "### Cost" in text


def test_diffstat_counts_hunk_lines_not_headers() -> None:
    assert diffstat(PATCH) == [("calc.py", 1, 1)]
    assert diffstat("") == []


def test_a_quoted_non_ascii_path_is_listed_by_its_name(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "core.quotePath=true", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    git("init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "café.py").write_text("a = 1\n", encoding="utf-8")
    (tmp_path / "src" / "plain.py").write_text("b = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (tmp_path / "src" / "café.py").write_text("a = 2\nc = 3\n", encoding="utf-8")
    (tmp_path / "src" / "plain.py").write_text("b = 2\n")
    patch = git("diff")
    assert 'diff --git "a/src/caf\\303\\251.py" "b/src/caf\\303\\251.py"' in patch

    assert diffstat(patch) == [("src/café.py", 2, 1), ("src/plain.py", 1, 1)]
    section = body(result(patch=patch))
    assert "- `src/café.py` (+2 -1)" in section
    assert "\\303" not in section and "diff --git" not in section


def test_the_models_title_wins_and_stays_inert() -> None:
    assert pr_title("A long summary. More.", title="Divide discounts by 100") == (
        "Divide discounts by 100"
    )
    hostile = pr_title("x", title="Fixes #12 for @octocat, see https://evil.test")
    assert hostile == f"F{ZWJ}ixes #{ZWJ}12 for @{ZWJ}octocat, see https:{ZWJ}//evil.test"
    # A blank title falls back to the summary.
    assert pr_title("Fix the sign", title="  ") == "Fix the sign"


def test_the_plan_in_the_body_is_inert() -> None:
    text = body(result(plan=[{"step": "### Closes #3 for @octocat <b>x</b>", "status": "done"}]))
    (line,) = [ln for ln in text.splitlines() if ln.startswith("> - [x]")]
    assert "@octocat" not in line and "Closes #3" not in line and "<b>" not in line
    assert not any(ln.startswith("### Closes") for ln in text.splitlines())


def test_pr_body_plan_parameter_wins_over_the_result() -> None:
    text = body(plan=["Only step"])
    assert "- [ ] Only step" in text
    assert "Reproduce the failure" not in text


def test_pr_body_without_optional_parts() -> None:
    bare = {"mission": "m1", "status": "verified", "summary": "ok"}
    text = body(bare, mission_url=None, screenshot_url=None)
    for absent in ("### Plan", "### Verification", "### Screenshot", "### Cost", "live view"):
        assert absent not in text
    assert "mission `m1`" in text


def test_pr_body_shows_tamper_findings_and_reasons() -> None:
    verification = copy.deepcopy(RESULT["verification"])
    verification.update(
        verified=False,
        reasons=["tests/test_calc.py::test_add still fails", "tests/test_calc.py: added skip"],
        tamper=[{"path": "tests/test_calc.py", "kind": "skip_added", "detail": "added skip"}],
    )
    text = body(result(status="unverified", message="not verified", verification=verification))
    assert text.startswith("## ⚠️ Fix not verified")
    assert "**Outcome:** not verified" in text
    assert "### ⚠️ Test tampering" in text
    assert "- `tests/test_calc.py` (skip\\_added): added skip" in text
    assert "- tests/test\\_calc.py::test\\_add still fails" in text
    assert "did not pass." in text


@pytest.mark.parametrize(
    ("status", "title"),
    [
        ("verified", "Verified fix"),
        ("unverified", "Fix not verified"),
        ("flaky", "The failure is flaky"),
        ("nothing_to_fix", "Nothing to fix"),
        ("budget_exceeded", "Budget exceeded"),
        ("error", "Mission failed"),
        ("refused", "Refused"),
        ("interrupted", "Interrupted"),
        ("something_new", "something_new"),
    ],
)
def test_check_run_titles(status: str, title: str) -> None:
    output = check_run_output(result(status=status))
    assert output["title"] == f"{title} · $0.0043"
    assert set(output) == {"title", "summary", "text"}


def test_check_run_output_sections() -> None:
    output = check_run_output(result(cost_usd=1.5))
    assert output["title"] == "Verified fix · $1.50"
    assert output["summary"].startswith("## ✅ Verified fix")
    assert "| `tests/test_calc.py::test_add` | failed | passed | ✅ fixed |" in output["text"]
    assert "### Cost" in output["text"]


def test_check_run_output_of_an_empty_result() -> None:
    output = check_run_output({})
    assert output["title"] == "Mission failed"
    assert output["text"] == ""


@pytest.mark.parametrize(
    ("user", "permission", "expected"),
    [
        (
            "octocat",
            "read",
            "@octocat, only people with write access can ask Loopwright to fix "
            "a pull request; your permission is read.",
        ),
        ("mona-lisa", "triage", "your permission is triage."),
        ("octocat", "none", "your permission is none."),
        ("octocat", "<b>admin</b>", "your permission is unknown."),
        ("<img src=x>", "read", "`<img src=x>`, only people"),
        ("dependabot[bot]", "read", "@dependabot[bot], only people"),
    ],
)
def test_refusal_comment(user: str, permission: str, expected: str) -> None:
    text = refusal_comment(user, permission)
    assert expected in text
    assert "<b>" not in text


def test_explain_command_comment_cannot_trigger_itself() -> None:
    text = explain_command_comment()
    assert "works on pull requests, not issues" in text
    assert "write access" in text
    assert parse_command(text) is None


def test_fork_patch_comment_carries_the_diff() -> None:
    text = fork_patch_comment(RESULT, PATCH, mission_url=MISSION_URL)
    assert "comes from a fork" in text
    assert "git apply" in text
    assert f"```diff\n{PATCH.rstrip()}\n```" in text
    assert "too long" not in text


# -- injection from model text -------------------------------------------------------------

INJECTIONS = [
    # (id, summary, forbidden substrings, required substrings)
    ("html-img", "<img src=x onerror=alert(1)>", ["<img"], ["&lt;img src=x onerror=alert(1)&gt;"]),
    ("script", "<script>fetch('//evil')</script>", ["<script"], ["&lt;script&gt;"]),
    ("details-hides-text", "<details><summary>ok</summary>", ["<details>"], ["&lt;details&gt;"]),
    ("html-comment", "visible <!-- hidden -->", ["<!--"], ["&lt;\\!-- hidden --&gt;"]),
    ("entity-mention", "&#64;octocat", ["&#64;"], ["&amp;#"]),
    ("mention", "thanks @octocat!", ["@octocat"], [f"@{ZWJ}octocat"]),
    ("team-mention", "cc @github/security", ["@github/security"], [f"@{ZWJ}github/security"]),
    ("mention-after-underscore", "x_@octocat", ["@octocat"], [f"@{ZWJ}octocat"]),
    ("closing-keyword", "Fixes #12 and closes #13", ["#12", "#13"], [f"#{ZWJ}12"]),
    ("cross-repo-ref", "see octo/repo#3", ["repo#3"], [f"#{ZWJ}3"]),
    ("gh-ref", "see GH-7", ["GH-7"], [f"GH-{ZWJ}7"]),
    ("markdown-image", "![x](https://evil.example/p.png)", ["![x]("], ["\\!\\[x\\]"]),
    ("markdown-link", "[click](javascript:alert(1))", ["[click]("], ["\\[click\\]"]),
    ("reference-link", "[a]: https://evil.example", ["[a]:"], ["\\[a\\]:"]),
    ("autolink", "<https://evil.example>", ["<https://"], [f"&lt;https:{ZWJ}//evil.example&gt;"]),
    ("emphasis", "**bold** _it_", ["**bold**"], ["\\*\\*bold\\*\\*"]),
    ("table-pipe", "a | b", ["a | b"], ["a \\| b"]),
    ("github-token", "token ghp_abcdefghijklmnop1234 leaked", ["ghp_abcdefghijklmnop1234"], []),
    ("fine-grained-pat", "github_pat_11ABCDEFG0123456789_abcdef", ["github_pat_11ABC"], []),
    ("installation-token", "ghs_CANARYabcdefghijklmnop", ["CANARY"], []),
    ("model-key", "sk-CANARY-0123456789abcdef", ["CANARY"], []),
]


@pytest.mark.parametrize(
    ("summary", "forbidden", "required"),
    [pytest.param(s, f, r, id=i) for i, s, f, r in INJECTIONS],
)
def test_model_text_is_inert_everywhere(
    summary: str, forbidden: list[str], required: list[str]
) -> None:
    res = result(
        summary=summary,
        message=summary,
        status="unverified",
        plan=[{"step": summary, "status": "done"}],
    )
    outputs = {
        "pr_body": body(res),
        "check_run.summary": check_run_output(res)["summary"],
        "fork_patch_comment": fork_patch_comment(res, PATCH),
    }
    for name, text in outputs.items():
        for bad in forbidden:
            assert bad not in text, name
        for good in required:
            assert good in text, name


@pytest.mark.parametrize(
    "secret_field",
    ["summary", "message", "plan", "test_id", "tamper_detail", "command", "patch"],
)
def test_known_secrets_are_masked_wherever_they_appear(secret_field: str) -> None:
    secret = "hunter2-very-secret-value"
    redactor = Redactor([secret])
    res = result(status="unverified")
    verification = res["verification"]
    if secret_field in ("summary", "message"):
        res[secret_field] = f"the key is {secret}"
    elif secret_field == "plan":
        res["plan"] = [{"step": f"print {secret}", "status": "done"}]
    elif secret_field == "test_id":
        verification["rows"][0]["id"] = f"test_{secret}"
    elif secret_field == "tamper_detail":
        verification["tamper"] = [{"path": "t.py", "kind": "x", "detail": secret}]
    elif secret_field == "command":
        verification["commands"][0]["command"] = f"pytest --token {secret}"
    texts = [
        pr_body(res, mission_url=None, screenshot_url=None, redactor=redactor),
        *check_run_output(res, redactor=redactor).values(),
        fork_patch_comment(res, PATCH + f"+# {secret}\n", redactor=redactor),
    ]
    for text in texts:
        assert secret not in text
    assert any(MASK in t or MASK.replace("[", "\\[").replace("]", "\\]") in t for t in texts)


TABLE_IDS = [
    ("pipe", "test_x[a|b]"),
    ("backtick", "test_x[`]"),
    ("backticks-run", "test_x[``a``]"),
    ("newline", "test_x[a\nb]"),
    ("html", "test_x[<img src=x onerror=alert(1)>]"),
    ("mention", "test_x[@octocat]"),
]


@pytest.mark.parametrize("test_id", [pytest.param(t, id=i) for i, t in TABLE_IDS])
def test_hostile_test_ids_stay_in_one_table_cell(test_id: str) -> None:
    verification = copy.deepcopy(RESULT["verification"])
    verification["rows"][0]["id"] = test_id
    text = body(result(verification=verification))
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 1
    # Four columns: five unescaped pipes.
    assert len(re.findall(r"(?<!\\)\|", rows[0])) == 5
    assert rows[0].endswith("| failed | passed | ✅ fixed |")


@pytest.mark.parametrize(
    ("mission_url", "screenshot_url"),
    [
        pytest.param("javascript:alert(1)", "javascript:alert(1)", id="javascript"),
        pytest.param("https://x.example/a) ![b](https://evil", None, id="paren-breakout"),
        pytest.param("https://x.example/a b", "https://x.example/<img>", id="space-and-html"),
        pytest.param("", "", id="empty"),
    ],
)
def test_unsafe_urls_are_left_out(mission_url: str, screenshot_url: str | None) -> None:
    text = body(mission_url=mission_url, screenshot_url=screenshot_url)
    assert "javascript:" not in text
    assert "evil" not in text
    assert "### Screenshot" not in text
    assert "live view" not in text


def test_code_spans_survive_backticks() -> None:
    assert code("a`b", Redactor()) == "``a`b``"
    assert code("`a", Redactor()) == "`` `a ``"
    assert code("", Redactor()) == ""


def test_prose_escapes_markdown_and_html() -> None:
    assert prose("a_b*c", Redactor()) == "a\\_b\\*c"
    assert prose("1 < 2 & 3", Redactor()) == "1 &lt; 2 &amp; 3"
    assert prose("line one\nline two", Redactor(), inline=True) == "line one line two"


# -- sizes -----------------------------------------------------------------------------------


def test_pr_body_fits_github_limit_and_keeps_the_footer() -> None:
    many_rows = [
        {
            "id": f"tests/test_big.py::test_{n}",
            "before": "failed",
            "after": "failed",
            "status": "still_failing",
        }
        for n in range(5_000)
    ]
    verification = dict(
        RESULT["verification"], verified=False, rows=many_rows, reasons=["x" * 400] * 200
    )
    huge = result(
        summary="word " * 50_000, plan=[{"step": "s" * 600}] * 100, verification=verification
    )
    text = body(huge)
    assert len(text) <= PR_BODY_LIMIT
    assert text.rstrip().endswith(f"[live view]({MISSION_URL})</sub>")
    assert "… and 4800 more rows." in text
    assert "more steps" in text


def test_check_run_output_fits_github_limits() -> None:
    many_rows = [
        {
            "id": f"tests/test_big.py::test_{n}_" + "x" * 200,
            "before": "failed",
            "after": "failed",
            "status": "still_failing",
        }
        for n in range(190)
    ]
    verification = dict(
        RESULT["verification"], verified=False, rows=many_rows, reasons=["r" * 400] * 60
    )
    output = check_run_output(
        result(status="x" * 1000, summary="word " * 50_000, verification=verification)
    )
    assert len(output["title"]) <= CHECK_TITLE_LIMIT
    assert len(output["summary"]) <= CHECK_TEXT_LIMIT
    assert len(output["text"]) <= CHECK_TEXT_LIMIT
    assert output["text"].endswith("… truncated to fit GitHub's limit")


def test_fork_patch_comment_truncates_long_diffs_inside_the_fence() -> None:
    line = "+" + "x" * 99 + "\n"
    patch = "diff --git a/big.txt b/big.txt\n" + line * 2_000
    text = fork_patch_comment(RESULT, patch, mission_url=MISSION_URL)
    assert len(text) <= COMMENT_LIMIT
    assert "The diff is too long for a comment: showing" in text
    assert f"of 2001 lines. The full patch is at {MISSION_URL}." in text
    fence_body = text.split("```diff\n", 1)[1]
    shown, _, after = fence_body.partition("\n```\n")
    assert after.startswith("\nThe diff is too long")
    assert all(row == line.rstrip("\n") for row in shown.splitlines()[1:])


def test_fork_patch_comment_cannot_be_closed_by_the_patch() -> None:
    patch = "diff --git a/README.md b/README.md\n ```\n+```\n+@octocat <img src=x>\n ```\n"
    text = fork_patch_comment(RESULT, patch)
    assert "````diff\n" in text
    assert text.rstrip().endswith("````")


def test_fenced_uses_a_longer_fence_than_the_text() -> None:
    assert fenced("```\nx\n```", "diff") == "````diff\n```\nx\n```\n````"
    assert fenced("plain") == "```\nplain\n```"


@pytest.mark.parametrize(
    "text",
    [
        "pip install x\r```\r@everyone [here](https://evil.example)\n",
        "pip install x\r\n```\r\n**bold**",
        "echo '\r  ````\r' && pip install x",
    ],
    ids=["lone-cr", "crlf", "indented-longer-run-after-cr"],
)
def test_fenced_is_not_closed_by_a_fence_after_a_carriage_return(text: str) -> None:
    block = fenced(text)
    # GitHub breaks lines at \r as well as \n: split the same way and check that only the
    # last line closes the block.
    lines = re.split(r"\r\n|\r|\n", block)
    fence = lines[0]
    assert set(fence) == {"`"}
    inner = lines[1:-1]
    assert lines[-1] == fence
    assert not any(line.lstrip(" ").startswith(fence) for line in inner)
    assert "\r" not in block


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("short", 10, "short", id="fits"),
        pytest.param("a\nb\nc\nd", 5, "a[…]", id="cuts-at-line-break"),
        pytest.param("abcdefghij", 6, "abc[…]", id="no-line-break"),
        pytest.param("abcdefghij", 2, "[…"[:2], id="limit-below-note"),
    ],
)
def test_truncate(text: str, limit: int, expected: str) -> None:
    out = truncate(text, limit, "[…]")
    assert out == expected
    assert len(out) <= limit


# -- SECURITY 46: model prose cannot close, mention or break out of its quote ---------------

KEYWORDS = ["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"]
REFERENCES = [
    "#1",
    ": #1",
    "GH-1",
    "gh-1",
    "octo/repo#1",
    "https://github.com/octo/repo/issues/1",
    "https://github.com/octo/repo/pull/1",
    "http://github.com/octo/repo/issues/1",
]
# What GitHub acts on: a closing keyword, optional colon and spaces, then a reference.
LIVE_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*"
    r"(?:#\d|GH-\d|[\w.-]+/[\w.-]+#\d|https?://\S+/(?:issues|pull)/\d)",
    re.IGNORECASE,
)
LIVE_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9][\w-]*(?:/[\w-]+)?")
LIVE_URL = re.compile(r"\b(?:https?://|www\.)", re.IGNORECASE)


def _case_forms(word: str) -> list[str]:
    return [word, word.upper(), word.title()]


CLOSING_CASES = [
    f"{form} {ref}" for word in KEYWORDS for form in _case_forms(word) for ref in REFERENCES
]


def _model_outputs(text: str) -> dict[str, str]:
    res = result(
        summary=f"{text}\nsecond line {text}",
        message="not verified",
        status="unverified",
        plan=[{"step": text, "status": "done"}],
    )
    return {
        "pr_body": body(res),
        "check_run.summary": check_run_output(res)["summary"],
        "fork_patch_comment": fork_patch_comment(res, PATCH),
        "pr_title": pr_title(text),
    }


@pytest.mark.parametrize("text", CLOSING_CASES)
def test_no_closing_keyword_survives(text: str) -> None:
    assert LIVE_CLOSING.search(text) is not None  # the input would close an issue
    for name, output in _model_outputs(text).items():
        assert LIVE_CLOSING.search(output) is None, (name, output)


MENTIONS = ["@octocat", "@octo-org/security-team", "(@mona)", "cc:@a", "\n@bot", "@Octo_Cat"]


@pytest.mark.parametrize("text", MENTIONS)
def test_no_mention_survives(text: str) -> None:
    assert LIVE_MENTION.search(text) is not None
    for name, output in _model_outputs(text).items():
        model_part = output.split("### Verification")[0]
        assert LIVE_MENTION.search(model_part) is None, (name, output)


@pytest.mark.parametrize("text", ["see https://evil.example/x", "www.evil.example", "HTTP://E.X"])
def test_bare_urls_are_not_linked(text: str) -> None:
    for name, output in _model_outputs(text).items():
        model_part = output.split("### Verification")[0].split("[Watch the mission")[0]
        assert LIVE_URL.search(model_part) is None, (name, output)


BREAKOUTS = {
    "heading-after-newline": "ok\n# Injected heading",
    "heading-after-cr": "ok\r## Injected heading",
    "heading-after-crlf": "ok\r\n### Injected heading",
    "setext-heading": "Injected heading\n===",
    "setext-dashes": "Injected heading\n---",
    "blank-line-then-heading": "ok\n\n# Injected heading",
    "html-block": "ok\n<div align=center><h1>Injected heading</h1></div>",
    "raw-image": "ok\n![Injected heading](https://evil.example/p.png)",
    "reference-definition": "ok\n[Injected heading]: https://evil.example",
    "table": "| Injected heading | b |\n| --- | --- |\n| c | d |",
    "fence-backticks": "```\n# Injected heading\n```",
    "fence-tildes": "~~~\n# Injected heading\n~~~",
    "indented-heading": "   # Injected heading",
    "list-then-heading": "- a\n1. b\n+ c\n# Injected heading",
    "quote-marker": "> quoted\n>\n# Injected heading",
}


@pytest.mark.parametrize("summary", list(BREAKOUTS.values()), ids=list(BREAKOUTS))
def test_model_summary_cannot_leave_its_quote(summary: str) -> None:
    res = result(summary=summary, plan=[{"step": summary, "status": "done"}])
    for text in (body(res), check_run_output(res)["summary"], fork_patch_comment(res, PATCH)):
        lines = re.split(r"\r\n|\r|\n", text)
        start = lines.index("The model's summary, as it wrote it:") + 2
        end = lines.index("", start)
        quoted = lines[start:end]
        assert quoted and all(line.startswith(">") for line in quoted), quoted
        assert "Injected heading" in " ".join(quoted)
        # Nothing outside the quotes mentions it, and inside no line is block syntax.
        outside = [ln for ln in lines if not ln.startswith(">")]
        assert not any("Injected heading" in ln for ln in outside), outside
        for line in quoted:
            inner = line[1:].lstrip(" ")
            assert not re.match(
                r"(?:#|=+$|-{3,}$|<|!\[|\[[^\]]*\]:|\||```|~~~|[-+] |\d+\. )", inner
            )
    # The plan is a quoted list, one item per step, whatever the step says.
    plan = [ln for ln in body(res).splitlines() if ln.startswith("> - [x]")]
    assert len(plan) == 1


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ("Fix the discount", "Fix the discount"),
        ("fixed: GH-2", f"f{ZWJ}ixed: GH-{ZWJ}2"),
        ("", "Fix failing tests"),
        ("\n\n  \nsecond", "second"),
        ("Closes #7 and @octocat\nmore", f"C{ZWJ}loses #{ZWJ}7 and @{ZWJ}octocat"),
        ("a\rb", "a"),
        ("tab\tand\x1b[31mred", "tab and [31mred"),
        # One word longer than a title can only be cut.
        ("x" * 200, "x" * 70 + "…"),
        ("see https://github.com/o/r/issues/1", f"see https:{ZWJ}//github.com/o/r/issues/1"),
        # The first sentence, without its full stop.
        (
            "line_total treated discount_percent as a fraction (10 meant 1000%). It now "
            "divides by 100, so a 10% discount takes 10% off.",
            "line_total treated discount_percent as a fraction (10 meant 1000%)",
        ),
        # Too long: whole words and an ellipsis, never half a word.
        (
            "Divide the discount percentage by one hundred before applying it to the gross "
            "line total of every invoice line",
            "Divide the discount percentage by one hundred before applying it to…",
        ),
    ],
)
def test_pr_title_is_one_inert_line(summary: str, expected: str) -> None:
    assert pr_title(summary) == expected
    assert len(pr_title(summary).replace(ZWJ, "")) < 72
    assert "\n" not in pr_title(summary) and "\r" not in pr_title(summary)


LATIN1_PATCH = (
    'diff --git "a/caf\\351.txt" "b/caf\\351.txt"\n--- "a/caf\\351.txt"\n+++ "b/caf\\351.txt"\n'
    "@@ -1 +1 @@\n-cafe\n+caf\udce9\n"
)
"""A patch to a Latin-1 file with a Latin-1 name, as a mission reads git's bytes: the byte
0xE9 in the content is the lone surrogate U+DCE9, which no UTF-8 request body can carry."""


def test_a_fork_comment_says_where_the_exact_patch_is_when_it_is_not_utf8() -> None:
    comment = fork_patch_comment(RESULT, LATIN1_PATCH, mission_url=MISSION_URL)
    assert "+caf\ufffd\n" in comment
    comment.encode("utf-8")  # what the API client sends: strict UTF-8
    assert "not UTF-8" in comment and f"[live view]({MISSION_URL})" in comment
    # A UTF-8 patch gets no such note.
    assert "not UTF-8" not in fork_patch_comment(RESULT, PATCH, mission_url=MISSION_URL)
