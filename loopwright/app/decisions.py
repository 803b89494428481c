"""`POST /api/missions/{id}/decisions`: approve, reject or redirect a mission in pair mode
from the live view, or send it guidance while it runs.

Who may is exactly who may cancel (`loopwright.app.cancel`): the dashboard token, or a
GitHub sign-in with write permission on the repository, and a request sent with cookies
carries `X-Loopwright-CSRF`. The decision is recorded in the store; the mission's worker,
in whichever process it runs, polls for it (`StorePair`).
"""

from __future__ import annotations

import json
from typing import Any

from litestar import Request, post
from litestar.di import NamedDependency
from litestar.exceptions import ClientException, PermissionDeniedException
from litestar.params import FromPath, RawBody
from litestar.response import Response
from litestar.status_codes import HTTP_202_ACCEPTED, HTTP_400_BAD_REQUEST, HTTP_409_CONFLICT

from loopwright.app.api import Viewer, require_token, visible_mission
from loopwright.app.cancel import by_bearer, check_csrf, require_writer
from loopwright.app.pair import BadDecision, check_decision, decide
from loopwright.app.params import json_problem
from loopwright.app.runtime import Runtime
from loopwright.config import Settings
from loopwright.request import MissionRequest
from loopwright.store.pair import DecisionRefused

FIELDS = ("decision", "text", "request")


@post(
    "/api/missions/{mission_id:str}/decisions",
    guards=[require_token],
    sync_to_thread=True,
    summary="Decide a pair-mode request, or send guidance",
    status_code=HTTP_202_ACCEPTED,
)
def post_decision(
    request: Request[Any, Any, Any],
    settings: NamedDependency[Settings],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[Viewer],
    mission_id: FromPath[str],
    body: RawBody,
) -> Response[dict[str, Any]]:
    """`{"decision": "approve"|"reject"|"redirect", "text": "...", "request": "<id>"}`.

    approve and reject decide the pending request (409 when none is pending, or `request`
    names another); redirect decides it too, or while none is pending is guidance the
    loop takes before its next model call. 202 with the recorded decision; 409 when the
    mission is not running or waiting.
    """
    if settings.dashboard_token is None and not settings.github.oauth_enabled:
        raise PermissionDeniedException(
            "deciding needs a dashboard token (LOOPWRIGHT_DASHBOARD_TOKEN) or GitHub "
            "sign-in; set one, or comment `/loopwright approve`, `/loopwright reject <why>` "
            "or `/loopwright redirect <guidance>` on the pull request"
        )
    if not by_bearer(settings, request):
        check_csrf(settings, request)
    mission = visible_mission(runtime.store, viewer, mission_id)
    if viewer.login is not None:
        require_writer(
            runtime,
            viewer.login,
            MissionRequest.from_dict(dict(mission.request)),
            "decide for its missions",
        )
    data = _json_object(body)
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ClientException(
            f"unknown field {', '.join(unknown)[:100]}; the fields are {', '.join(FIELDS)}",
            status_code=HTTP_400_BAD_REQUEST,
        )
    try:
        kind, text = check_decision(data.get("decision"), data.get("text", ""), data.get("request"))
    except BadDecision as bad:
        raise ClientException(str(bad), status_code=HTTP_400_BAD_REQUEST) from None
    by = f"@{viewer.login}" if viewer.login is not None else "dashboard"
    try:
        stored = decide(runtime.store, mission, kind, by, text, data.get("request"))
    except DecisionRefused as refused:
        raise ClientException(str(refused), status_code=HTTP_409_CONFLICT) from None
    return Response(stored.to_dict(), status_code=HTTP_202_ACCEPTED)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise ClientException(
            'send a JSON object, e.g. {"decision": "reject", "text": "use the standard '
            'library instead"} (Content-Type: application/json)',
            status_code=HTTP_400_BAD_REQUEST,
        )
    # A lone surrogate (`\ud83c`, half an emoji a client cut) would be stored as U+FFFD and
    # then fail the answer: refused first, as a webhook's payload is, and nothing is stored.
    problem = json_problem(data, body)
    if problem:
        raise ClientException(
            f"{problem}; send the text as UTF-8", status_code=HTTP_400_BAD_REQUEST
        )
    return data
