#!/usr/bin/env bash
# Runs the main job end to end on the embedded defaults: the bundled example repository
# (a Python project with a real bug), a recorded model session (no API key needed), and a
# hardened Docker sandbox. Prints the live progress, the verification table and the patch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r examples/python-invoice "$work/repo"
git -C "$work/repo" init -q
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=demo -c user.email=demo@example.com commit -qm "example with a bug"

status=0
LOOPWRIGHT_DATA_DIR="$work/data" .venv/bin/loopwright fix "$work/repo" \
  --replay examples/recordings/python-invoice.json \
  --events "$work/events.ndjson" || status=$?

echo
echo "The fix, applied to the example's working tree:"
git -C "$work/repo" --no-pager diff --stat
git -C "$work/repo" --no-pager diff
echo "Events written: $(wc -l < "$work/events.ndjson") (replay them with: loopwright replay FILE)"
exit "$status"
