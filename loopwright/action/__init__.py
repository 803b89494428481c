"""The GitHub Action's entrypoint (`python -m loopwright.action`): one fix mission in a workflow.

It reads the Actions environment (the event payload, the repository, the workspace, the
`INPUT_*` variables `action/action.yml` sets), decides what to fix, refuses what it must
refuse before any model call (a fork head under `pull_request_target` or `workflow_run`, a
`/loopwright fix` comment from someone without write access), runs `FixMission`, delivers a
verified fix with the shared delivery code and the workflow's token, and writes the step
outputs, the step summary and an artifact directory (event log, result, patch, screenshot).

Where the tree and the rules come from, per event:

- `workflow_run` and `issue_comment` run in the default branch's context, so the tree is a
  fresh clone at the pinned head commit (the failing run's, or the pull request's head read
  when the command was authorized); the same clean clone receives the patch for delivery.
- `pull_request`, `pull_request_target`, `push`, `workflow_dispatch` and other events are
  a step after a failing test step in the same job: the workspace, as the job left it, is
  the tree (the mission copies it; nothing is run in it), and a clean clone at the head
  commit receives the patch.
- The repository config always comes from the default branch through the API; only when
  that is unreadable and the workspace is not pull-request code is the workspace's used.

Exit codes: 0 when a fix was verified and delivered, or the event asks for nothing; 1 for
every other outcome, refusals included; 2 for usage and configuration errors.
"""
