"""Where a mission's time goes: the wall time of each phase of the bundled Python and Node
example missions on Docker, replayed from their recorded model sessions.

Each example is copied into a fresh git repository and fixed by the real CLI
(`loopwright fix --replay RECORDING --sandbox docker --dry-run`); the times come from the
mission's own `phase` events. Also reported: the gap between `loop finished` and
`verify started` (target < 1 s; the patch export is the only phase in it) and the whole
mission (target < 8 s for python-invoice once the sandbox image exists).

Run: python -m benchmarks.phase_timing [--runs N] [--smoke]  (builds the sandbox image if
needed; `--smoke` is one python-invoice mission, to check that the benchmark works).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from loopwright.config import Settings
from loopwright.missions.fix import PHASES
from loopwright.sandbox.docker.engine import connect
from loopwright.sandbox.image import ensure_image
from loopwright.sandbox.workspace import git

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"python-invoice": "python-invoice.json", "node-slugify": "node-slugify.json"}
GAP_TARGET_S = 1.0
MISSION_TARGETS_S = {"python-invoice": 8.0}
CLI = "import sys; from loopwright.cli.main import main; sys.exit(main())"


def user_repo(name: str, work: Path) -> Path:
    """The example as a user's repository: one commit, clean working tree."""
    repo = work / name
    shutil.copytree(ROOT / "examples" / name, repo)
    git(["init", "-q"], repo)
    git(["add", "-A"], repo)
    git(["commit", "-qm", "initial"], repo)
    return repo


def run_mission(name: str, work: Path) -> dict[str, float]:
    """One replayed Docker mission; seconds per phase, plus `gap` and `mission`."""
    repo = user_repo(name, work)
    events_path = work / f"{name}.ndjson"
    env = {**os.environ, "LOOPWRIGHT_DATA_DIR": str(work / "data")}
    done = subprocess.run(
        [
            sys.executable, "-c", CLI, "fix", str(repo),
            "--replay", str(ROOT / "examples" / "recordings" / EXAMPLES[name]),
            "--sandbox", "docker", "--dry-run", "--json", "--events", str(events_path),
        ],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    result = json.loads(done.stdout) if done.stdout.strip() else {}
    if result.get("status") != "verified":
        raise SystemExit(f"{name}: the mission was not verified ({done.stderr[-2000:]})")
    events = [json.loads(line) for line in events_path.read_text().splitlines()]
    times: dict[str, float] = {}
    for event in events:
        if event["type"] == "phase":
            times[event["name"]] = times.get(event["name"], 0.0) + float(event["duration_s"])
    times["gap"] = stage_ts(events, "verify", "started") - stage_ts(events, "loop", None)
    times["mission"] = float(result["elapsed_s"])
    return times


def stage_ts(events: list[dict[str, Any]], stage: str, status: str | None) -> float:
    """When `stage` started (`status="started"`) or ended (None: its first other status)."""
    for event in events:
        if event["type"] != "stage" or event["stage"] != stage:
            continue
        if (status is None and event["status"] != "started") or event["status"] == status:
            return float(event["ts"])
    raise SystemExit(f"no {stage} {status or 'end'} event in the mission's log")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one python-invoice mission, to check it works (exits 0 whether or not targets hold)",
    )
    args = parser.parse_args()
    settings = Settings.from_env()
    ensure_image(connect(), settings, lambda line: None)
    series: dict[str, dict[str, list[float]]] = {}
    examples = ["python-invoice"] if args.smoke else list(EXAMPLES)
    for name in examples:
        series[name] = {}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                for key, value in run_mission(name, Path(tmp)).items():
                    series[name].setdefault(key, []).append(value)
    names = examples
    print(f"runs per example: {args.runs} (p50 seconds)")
    print("| phase | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    rows = [*PHASES, "gap", "mission"]
    labels = {"gap": "gap: loop finished → verify started", "mission": "whole mission"}
    for row in rows:
        if not any(row in series[n] for n in names):
            continue
        cells = [
            f"{statistics.median(series[n][row]):.2f}" if row in series[n] else "-" for n in names
        ]
        print(f"| {labels.get(row, row)} | " + " | ".join(cells) + " |")
    met = True
    for name in names:
        gap = statistics.median(series[name]["gap"])
        ok = gap < GAP_TARGET_S
        met &= ok
        print(f"{name}: gap {gap:.2f} s (target < {GAP_TARGET_S:g} s) {'met' if ok else 'NOT met'}")
        target = MISSION_TARGETS_S.get(name)
        if target is not None:
            whole = statistics.median(series[name]["mission"])
            ok = whole < target
            met &= ok
            verdict = "met" if ok else "NOT met"
            print(f"{name}: whole mission {whole:.2f} s (target < {target:g} s) {verdict}")
    if not all(series[n].get("mission") for n in names):
        raise SystemExit("a mission reported no time")
    return 0 if met or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
