"""Every benchmark runs: each script in `benchmarks/` with `--smoke`, as a subprocess, exits 0
and prints its table. A new benchmark without a smoke entry here fails the coverage test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SUITE_PATH

BENCHMARKS = ROOT / "benchmarks"
SMOKE: dict[str, tuple[tuple[str, ...], str, bool]] = {
    # module: (extra arguments, a line of its table header, needs Docker)
    "app_mission": ((), "| measure (s) | p50 | p95 | max |", True),
    "context_tokens": ((), "| measure | value |", False),
    "fix_rate": (("--sandbox", "local"), "| task | agent | config | status |", False),
    "loop_overhead": ((), "| measure | p50 | p95 | max |", True),
    "phase_timing": ((), "| phase | python-invoice |", True),
    "sandbox_start": ((), "p50 ms", True),
    "scale_out": (("--sandbox", "local"), "| workers | missions/min | ratio to 1 worker |", False),
    "sse_fanout": ((), "| measure | value |", False),
    "verification_overhead": ((), "plain p50 ms", True),
}
SMOKE_ELSEWHERE = {
    # module: the test below that runs its smoke run (with more checks than the table)
    "webhook_ack": "test_webhook_ack_measures_a_baseline_checkout_in_the_same_rounds",
}
NOT_BENCHMARKS = {
    "fix_rate_peer": "runs the peer agent for one fix_rate run; fix_rate starts it",
    "model_router": "the loopback router fix_rate puts in front of its model servers",
    "litestar_floor": "the bare Litestar endpoint webhook_ack measures beside Loopwright",
}


def smoke_run(name: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`benchmarks.<name> --smoke` as a subprocess of this tree's environment."""
    env = {
        **os.environ,
        "PATH": f"{SUITE_PATH}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": str(ROOT),
        "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
    }
    return subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--smoke", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def modules() -> set[str]:
    return {p.stem for p in BENCHMARKS.glob("*.py") if p.stem != "__init__"}


def test_every_benchmark_module_has_a_smoke_run() -> None:
    smoked = set(SMOKE) | set(SMOKE_ELSEWHERE)
    missing = modules() - smoked - set(NOT_BENCHMARKS)
    assert not missing, f"benchmarks without a --smoke entry in {__file__}: {sorted(missing)}"
    assert not set(SMOKE) & set(SMOKE_ELSEWHERE)
    assert not smoked & set(NOT_BENCHMARKS)
    gone = (smoked | set(NOT_BENCHMARKS)) - modules()
    assert not gone, f"entries for benchmarks that no longer exist: {sorted(gone)}"
    tests = {name for name, value in globals().items() if name.startswith("test_")}
    assert set(SMOKE_ELSEWHERE.values()) <= tests, "a smoke run is said to be in a missing test"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.docker) if SMOKE[n][2] else n for n in sorted(SMOKE)],
)
def test_benchmark_smoke_run_exits_zero_with_its_table(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    extra, header, docker = SMOKE[name]
    if docker:
        request.getfixturevalue("docker_ready")
    run = smoke_run(name, tmp_path, *extra)
    tail = (run.stdout[-3000:], run.stderr[-3000:])
    assert run.returncode == 0, tail
    assert header in run.stdout, tail


@pytest.mark.slow
def test_webhook_ack_measures_a_baseline_checkout_in_the_same_rounds(tmp_path: Path) -> None:
    """webhook_ack's smoke run (1 and 2 workers, the SIGKILL part), with a baseline."""
    baseline = tmp_path / "baseline"
    shutil.copytree(
        ROOT / "loopwright", baseline / "loopwright", ignore=shutil.ignore_patterns("__pycache__")
    )
    # A checkout whose package notes every process that imports it: the baseline server's
    # parent and its two worker processes, which answer the deliveries.
    marker = tmp_path / "imported-from"
    init = baseline / "loopwright" / "__init__.py"
    init.write_text(
        init.read_text()
        + "\nimport os as _os, pathlib as _p\n"
        + f"with _p.Path({str(marker)!r}).open('a') as _f:\n"
        + "    _f.write(f'{_os.getpid()} {__file__}\\n')\n"
    )
    run = smoke_run("webhook_ack", tmp_path, "--baseline", str(baseline))
    tail = (run.stdout[-3000:], run.stderr[-3000:])
    assert run.returncode == 0, tail
    assert "| server | workers | p50 | p99 | max | deliveries/s |" in run.stdout, tail
    assert "| lost (2xx without a row) |" in run.stdout, tail  # the SIGKILL part's table
    rows = [line for line in run.stdout.splitlines() if line.startswith("| loopwright serve")]
    assert [r.split(" | ")[:2] for r in rows] == [
        ["| loopwright serve", "1"],
        [f"| loopwright serve, baseline ({baseline})", "1"],  # not a git checkout: its path
        ["| loopwright serve", "2"],
        [f"| loopwright serve, baseline ({baseline})", "2"],
    ], tail
    for row in rows:  # the share is the median of the rounds' own shares, within their range
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        low, high = (float(v) for v in cells[7].split("-"))
        assert low <= float(cells[6]) <= high, row
    imports = [line.split(" ", 1) for line in marker.read_text().splitlines()]
    assert {path for _, path in imports} == {str(init)}
    assert len({pid for pid, _ in imports}) >= 3  # the parent and both workers


def test_webhook_ack_refuses_a_baseline_without_a_loopwright_package(tmp_path: Path) -> None:
    run = smoke_run("webhook_ack", tmp_path, "--baseline", str(tmp_path))
    assert run.returncode == 2
    assert f"--baseline {tmp_path}: no loopwright package there; give a checkout" in run.stderr
