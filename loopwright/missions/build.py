"""Build mode: a small working app with tests, from a one-paragraph specification.

The model scaffolds the app in an empty repository inside a sandbox, with the same loop,
tools and caps as a fix. Verification is independent of it: a fresh sandbox holding only
the exported patch runs the detected tests, boots the app and screenshots its page. The
output directory then holds the app as a one-commit git repository, plus the report in
`loopwright-report/` (kept out of git through `.git/info/exclude`).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from loopwright.agent.context import Conversation
from loopwright.agent.model import Model
from loopwright.agent.prompts import BUILD_SYSTEM, build_task
from loopwright.agent.tools import Toolbox
from loopwright.clip import truncate_middle
from loopwright.config import ConfigError, Settings, effective_network
from loopwright.events import EventBus
from loopwright.missions.base import Mission, MissionFailed, Outcome
from loopwright.missions.standby import Standby
from loopwright.missions.trees import (
    changed_files,
    patch_path_problem,
    read_text,
    tree_files,
    write_into_sandbox,
)
from loopwright.missions.verification import setup_phase
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.repo_config import load_repo_config
from loopwright.sandbox.base import Sandbox, SandboxProvider
from loopwright.sandbox.workspace import (
    PatchTooLarge,
    WorkspaceError,
    apply_patch,
    copy_tree,
    export_patch,
    git,
    prepare_sandbox_repo,
)
from loopwright.verify.compare import TestRow, run_reasons
from loopwright.verify.detect import DetectionError, detect_tests
from loopwright.verify.runner import run_suite
from loopwright.verify.testfiles import Routed, classify, read_base_config
from loopwright.verify.verdict import Facts, judge
from loopwright.verify.web import BOOT_TIMEOUT_S, find_app, screenshot_app

Lang = Literal["node", "python"]
LANGS: tuple[Lang, ...] = ("node", "python")
REPORT_DIR = "loopwright-report"
TITLE_CHARS = 72
TEST_COMMANDS: dict[Lang, str] = {"node": "npm test", "python": "python -m pytest"}
# The model declares how a Python app starts in .loopwright.yml, so that file is writable here.
BUILD_PROTECTED = tuple(p for p in DEFAULT_PROTECTED_PATHS if not p.endswith("loopwright.yml"))
NOT_COPIED = (".git", ".loopwright", "node_modules", "__pycache__", ".pytest_cache", ".venv")


PYTHON_MANIFESTS = ("pyproject.toml", "requirements.txt")


def stack_mismatch(files: list[str], lang: Lang) -> str | None:
    """Why the files the model wrote are not an app in `lang` (None when they are): a
    Python app has pyproject.toml or requirements.txt and tests in .py files; a Node app
    has package.json."""
    names = {PurePosixPath(f).name for f in files}
    top = set(files)
    if lang == "node":
        if "package.json" in top:
            return None
        other = " (it looks like a Python app)" if top & set(PYTHON_MANIFESTS) else ""
        return f"--lang node asked for a Node app, and the model wrote no package.json{other}"
    python_tests = [f for f in files if PurePosixPath(f).suffix == ".py" and _is_python_test(f)]
    if not top & set(PYTHON_MANIFESTS):
        other = " (it looks like a Node app)" if "package.json" in names else ""
        return (
            "--lang python asked for a Python app, and the model wrote neither "
            f"pyproject.toml nor requirements.txt{other}"
        )
    if not python_tests:
        return "--lang python asked for a Python app, and the model wrote no tests in .py files"
    return None


def _is_python_test(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("test_") or name.endswith("_test.py")


def verified_message(verification: dict[str, Any], out: Path) -> str:
    """The verdict of a verified build, naming what was checked and nothing more."""
    checked = ["the app's own tests pass"]
    web = verification.get("web")
    if isinstance(web, dict) and web.get("ok"):
        checked.append("the app boots and renders")
    return f"verified: {'; '.join(checked)}; the app is in {out}"


class SpecError(ValueError):
    """The specification or the output directory is unusable; the message says why."""


def read_spec(value: str) -> str:
    """The specification text: `value` itself, or the contents of FILE for `@FILE`."""
    text = value
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SpecError(f"cannot read the specification from {path}: {why}") from None
    if not text.strip():
        where = f" ({value[1:]} is empty)" if value.startswith("@") else ""
        raise SpecError(
            f"the specification is empty{where}; describe the app to build, e.g. "
            '`loopwright build "A page listing my three favourite books" --out books`'
        )
    return text.strip()


def check_out_dir(out: Path) -> None:
    """Refuse an output directory that would mix the build with existing files."""
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out {out} is a file; name a new or empty directory")
    if out.is_dir() and any(out.iterdir()):
        raise SpecError(f"--out {out} is not empty; name a new or empty directory")


@dataclass
class BuildRequest:
    spec: str
    out: Path
    lang: Lang = "node"
    boot_timeout_s: float = BOOT_TIMEOUT_S
    mission_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def title(self) -> str:
        """The spec's first line, cut at a word to fit a commit subject."""
        first = self.spec.strip().splitlines()[0].strip()
        if len(first) <= TITLE_CHARS:
            return first
        return first[: TITLE_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


@dataclass
class BuildResult(Outcome):
    """A build's result: the shared outcome, and where the built app is."""

    out: str | None = None
    """The directory holding the built app, once written."""
    commit: str | None = None
    report: str | None = None
    files: list[str] = field(default_factory=list)


class BuildMission(Mission[BuildResult]):
    """Runs one build: prepare an empty repository → plan → loop → verify → deliver."""

    def __init__(
        self,
        request: BuildRequest,
        *,
        settings: Settings,
        provider: SandboxProvider,
        model: Model,
        events: EventBus,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            BuildResult(request.mission_id, "error"),
            settings=settings,
            provider=provider,
            model=model,
            events=events,
            clock=clock,
        )
        self.request = request
        self.standby: Standby | None = None
        """Verification's sandbox, started while the model builds."""

    def stages(self) -> None:
        base = self._prepare()
        patch = self._build(base)
        tree, verified = self._verify(base, patch)
        self._deliver(tree, verified)

    def done_fields(self) -> dict[str, Any]:
        return {"out": self.result.out}

    def _prepare(self) -> Path:
        self.events.enter("prepare", mode="build", lang=self.request.lang, spec=self.request.title)
        base = self.workdir / "trees" / "base"
        base.mkdir(parents=True)
        git(["init", "--quiet"], base)
        git(["commit", "--quiet", "--allow-empty", "-m", "loopwright: empty base"], base)
        self.events.leave("prepare", "ready", reason="an empty repository")
        return base

    def _build(self, base: Path) -> str:
        sandbox = self.sandboxes.open(base, network=False)
        prepare_sandbox_repo(sandbox, timeout_s=60)
        # Verification's sandbox starts while the model builds; it holds the empty base
        # repository and nothing the model wrote.
        self.standby = Standby(self.sandboxes, base, network=False, prepare=_prepare_repo)
        toolbox = Toolbox(
            sandbox,
            command_timeout_s=self.settings.command_timeout_s,
            protected_paths=BUILD_PROTECTED,
            test_command=TEST_COMMANDS[self.request.lang],
        )
        conversation = Conversation(
            system=BUILD_SYSTEM,
            task=build_task(self.request.spec, self.request.lang),
            context_tokens=self.settings.context_tokens,
        )
        loop = self.agent_loop(toolbox, conversation)
        outcome = loop.run()
        self.result.final_tier = loop.escalation.current
        self.result.summary = outcome.summary
        try:
            patch = export_patch(sandbox, timeout_s=120, base=base)
        except PatchTooLarge as exc:
            raise MissionFailed("unverified", str(exc)) from exc
        self.result.patch = patch
        if outcome.outcome == "budget_exceeded":
            raise MissionFailed("budget_exceeded", outcome.reason)
        if not patch.strip():
            raise MissionFailed("unverified", "the model wrote no files")
        return patch

    def _verify(self, base: Path, patch: str) -> tuple[Path, bool]:
        self.events.enter("verify")
        unfit = patch_path_problem(patch)
        if unfit is not None:
            # Refused before a copy of the tree is made: the host never walks such a path.
            self.events.leave("verify", "unverified")
            raise MissionFailed("unverified", unfit)
        tree = copy_tree(base, self.workdir / "trees" / "verify")
        apply_patch(tree, patch)
        reasons: list[str] = []
        evidence: dict[str, Any] = {"rows": [], "commands": [], "tamper": [], "web": None}
        stack = stack_mismatch(tree_files(tree), self.request.lang)
        if stack is not None:
            # Nothing of an app in another language is run: it is not what was asked for.
            reasons.append(stack)
            return tree, self._verdict(evidence, reasons)
        try:
            repo = load_repo_config(tree)
            plan = detect_tests(tree, explicit=repo.test_cmd, config_setup=repo.setup_cmd)
        except (ConfigError, DetectionError) as exc:
            reasons.append(str(exc))
            return tree, self._verdict(evidence, reasons)
        # As in a fix: the setup phase sees only the dependency and setup inputs, the
        # network goes before the rest of the app arrives, and the tests run without one.
        network = effective_network(self.settings.network, repo.network)
        config = read_base_config(
            tree_files(tree),
            lambda rel: read_text(tree, rel),
            test_command=plan.command,
            setup_command=plan.setup,
            test_script=plan.script,
        )
        files = [
            Routed(path, status, change, "dependency" if change.dependency else "main")
            for path, status in changed_files(patch)
            for change in [classify(path, None, read_text(tree, path), config)]
        ]
        dependency = [f for f in files if f.phase == "dependency"]
        timeout = self.settings.command_timeout_s
        wants_network = plan.setup is not None and network != "none"
        taken = self.standby.take() if self.standby is not None else None
        if taken is not None:
            sandbox = taken[0]
            sandbox.set_network(wants_network)
        else:
            sandbox = self.sandboxes.open(base, network=wants_network)
            prepare_sandbox_repo(sandbox, timeout_s=60)
        evidence["network"] = network
        evidence["phases"] = []
        if plan.setup:
            write_into_sandbox(sandbox, tree, dependency, base=base, timeout_s=timeout)
            setup = self.run_setup(sandbox, plan.setup)
            phase = setup_phase(plan.setup, network, [], exit_code=setup.exit_code)
            phase["tree"] = "the app's dependency and setup inputs only: " + ", ".join(
                f.path for f in dependency
            )
            evidence["phases"].append(phase)
            evidence["commands"].append(
                {"phase": "setup", "command": plan.setup, "exit_code": setup.exit_code}
            )
            if not setup.ok:
                reasons.append(f"the setup command `{plan.setup}` failed (exit {setup.exit_code})")
                return tree, self._verdict(evidence, reasons)
        sandbox.set_network(False)
        rest = [f for f in files if f.phase == "main" or not plan.setup]
        write_into_sandbox(sandbox, tree, rest, base=base, timeout_s=timeout)
        evidence["phases"].append(
            {"phase": "apply", "files": [f.path for f in rest], "network": "none"}
        )
        run = run_suite(sandbox, plan, timeout_s=self.settings.command_timeout_s)
        results = run.report.results
        evidence["rows"] = [
            asdict(
                TestRow(r.id, None, r.outcome, "new_pass" if r.outcome == "passed" else "new_fail")
            )
            for r in results
        ]
        evidence["commands"].append(
            {"phase": "after", "command": plan.command, "exit_code": run.result.exit_code}
        )
        evidence["report_source"] = {"after": run.report.source}
        evidence["after_output"] = truncate_middle(run.result.output, 4_000)
        untrusted = run_reasons(run.report)
        if not run.result.ok or run.report.failing():
            reasons.append(
                f"`{plan.command}` fails in a fresh sandbox (exit {run.result.exit_code})"
            )
        if untrusted:
            # The same stream, report-file and exit-code rules as a fix's verdict.
            reasons += [r for r in untrusted if r not in reasons]
        elif run.report.source != "exit-code" and not run.report.passing():
            reasons.append(f"`{plan.command}` ran no tests")
        app = find_app(tree, repo)
        if app is None:
            reasons.append(
                "the app has no start command: add scripts.start to package.json, or "
                "`app: {start: ..., port: ...}` to .loopwright.yml"
            )
        else:
            web = screenshot_app(
                sandbox,
                app,
                self.workdir / "screenshot.png",
                boot_timeout_s=self.request.boot_timeout_s,
                events=self.events,
            )
            evidence["web"] = web.to_dict()
            if not web.ok:
                reasons.append(web.reason)
        return tree, self._verdict(evidence, reasons)

    def _verdict(self, evidence: dict[str, Any], reasons: list[str]) -> bool:
        judged = judge(Facts(problems=tuple(reasons)))
        verified = judged.verified
        evidence.update(verified=verified, reasons=list(judged.reasons))
        self.result.verification = evidence
        self.events.emit("verification", **evidence)
        self.events.leave("verify", "verified" if verified else "unverified")
        return verified

    def _deliver(self, tree: Path, verified: bool) -> None:
        """Write the app to the output directory as a fresh repository, verified or not."""
        self.events.enter("deliver")
        out = self.request.out.expanduser().resolve()
        try:
            check_out_dir(out)
        except SpecError as exc:
            raise WorkspaceError(str(exc)) from None
        shutil.copytree(
            tree, out, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED), dirs_exist_ok=True
        )
        # A new repository of our own: nothing the model wrote configures this git.
        git(["init", "--quiet"], out)
        (out / ".git" / "info").mkdir(parents=True, exist_ok=True)
        with (out / ".git" / "info" / "exclude").open("a", encoding="utf-8") as exclude:
            exclude.write(f"{REPORT_DIR}/\n")
        git(["add", "--all"], out)
        message = f"Build: {self.request.title}\n\n{self.request.spec}\n"
        git(["commit", "--quiet", "-m", message], out)
        self.result.commit = git(["rev-parse", "HEAD"], out).strip()
        self.result.files = git(["ls-files"], out).splitlines()
        self.result.out = str(out)
        report_dir = out / REPORT_DIR
        report_dir.mkdir()
        shot = self.workdir / "screenshot.png"
        web = (self.result.verification or {}).get("web")
        if web and web.get("screenshot") and shot.is_file():
            shutil.copy2(shot, report_dir / "screenshot.png")
            self.result.screenshot = str(report_dir / "screenshot.png")
            web["screenshot"] = self.result.screenshot
        self.result.report = str(report_dir / "verification.json")
        if verified:
            self.result.status = "verified"
            self.result.message = verified_message(self.result.verification or {}, out)
        else:
            reasons = (self.result.verification or {}).get("reasons") or ["verification failed"]
            self.result.status = "unverified"
            self.result.message = f"{'; '.join(reasons)} (the app is in {out} anyway)"
        report = {
            "status": self.result.status,
            "message": self.result.message,
            "spec": self.request.spec,
            "lang": self.request.lang,
            "commit": self.result.commit,
            "verification": self.result.verification,
        }
        (report_dir / "verification.json").write_text(
            json.dumps(report, indent=2), encoding="utf-8"
        )
        self.events.leave(
            "deliver",
            "written",
            path=str(out),
            commit=self.result.commit,
            report=self.result.report,
        )


def _prepare_repo(sandbox: Sandbox) -> None:
    """What verification's sandbox gets before it is used, wherever it was started."""
    prepare_sandbox_repo(sandbox, timeout_s=60)
