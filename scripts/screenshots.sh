#!/usr/bin/env bash
# Regenerates the README's pictures of the live view from the browser tests that take them:
# docs/mission-page.png from a real scripted mission (`loopwright fix` with the scripted model
# and a local sandbox, played into a live server) and docs/costs.png. Needs Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOPWRIGHT_UPDATE_SCREENSHOTS=1
.venv/bin/pytest -q -p no:cacheprovider \
  tests/e2e/test_mission_legibility.py \
  tests/e2e/test_live_view.py::test_cost_view_shows_spend_per_tier_repository_and_day
git status --short docs/*.png
