"""The pages that change something: cancel a run, resume a hook, log in and out.

Every action is a POST carrying the CSRF token, and is confirmed: the first
POST answers with a page restating what will happen, whose button posts the
same form again with ``confirm=yes``.
"""

from __future__ import annotations

import json
import math
from urllib.parse import parse_qsl, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from workflow.client import get_run, resume_hook
from workflow.errors import HookNotFoundError, ScheduleNotFoundError
from workflow.schedules import get_schedule
from workflow.ui._context import Ui
from workflow.ui._paths import app_url, root_path
from workflow.ui._security import COOKIE

__all__ = ["SCHEDULE_ACTIONS", "cancel", "login_page", "logout", "resume", "schedule_action"]

MAX_FORM = 256 * 1024
"""The largest form body accepted, in bytes (a hook payload is the big one)."""


async def _form(request: Request) -> dict[str, str] | None:
    """The url-encoded form, or None if it is too large or not UTF-8."""
    body = await request.body()
    if len(body) > MAX_FORM:
        return None
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError:
        return None


async def _checked_form(ui: Ui, request: Request) -> dict[str, str] | Response:
    form = await _form(request)
    if form is None:
        return ui.error(request, 413, f"the form is over {MAX_FORM} bytes or not UTF-8")
    if not ui.guard.check_csrf(form.get("csrf")):
        return ui.error(request, 403, "the form's CSRF token is missing or stale: reload the page")
    return form


async def cancel(ui: Ui, request: Request) -> Response:
    """``POST /runs/{id}/cancel``: cancel gracefully (``grace`` seconds) or ``now``."""
    form = await _checked_form(ui, request)
    if isinstance(form, Response):
        return form
    run = get_run(request.path_params["run_id"], world=ui.world)
    status = await run.status()
    now = form.get("mode") == "now"
    grace_text = form.get("grace", "30").strip() or "30"
    try:
        grace = float(grace_text)
        if not math.isfinite(grace) or grace < 0:
            raise ValueError
    except ValueError:
        return ui.error(request, 400, f"grace must be a number of seconds >= 0, got {grace_text!r}")
    reason = form.get("reason", "").strip() or None
    if form.get("confirm") != "yes":
        return ui.page(
            request,
            "confirm_cancel.html",
            run_id=run.id,
            status=status.value,
            mode="now" if now else "graceful",
            grace=grace_text,
            reason=reason or "",
        )
    await run.cancel(reason, grace=None if now else grace)
    return RedirectResponse(app_url(request.scope, f"/runs/{quote(run.id, safe='')}"), 303)


async def resume(ui: Ui, request: Request) -> Response:
    """``POST /hooks/resume``: deliver a JSON ``payload`` to hook ``token``."""
    form = await _checked_form(ui, request)
    if isinstance(form, Response):
        return form
    token = form.get("token", "")
    payload_text = form.get("payload", "").strip() or "null"
    try:
        payload = json.loads(payload_text)
    except ValueError as exc:
        return ui.error(request, 400, f"the payload is not JSON: {exc}")
    if form.get("confirm") != "yes":
        return ui.page(
            request,
            "confirm_resume.html",
            token=token,
            payload=payload_text,
            shown=json.dumps(payload, ensure_ascii=False, indent=2),
            back=form.get("back", ""),
        )
    try:
        holder = await resume_hook(token, payload, world=ui.world)
    except HookNotFoundError:
        return ui.error(request, 404, f"no open run waits on hook {token!r}")
    except (TypeError, ValueError) as exc:
        return ui.error(request, 400, str(exc))
    return RedirectResponse(app_url(request.scope, f"/runs/{quote(holder.id, safe='')}"), 303)


SCHEDULE_ACTIONS = {
    "pause": "It stops firing until it is resumed.",
    "unpause": "It fires again; fires missed while paused run only within its catchup window.",
    "trigger": "It fires once now, under its overlap rule (also while paused).",
}
"""What each schedule action does, as the confirmation page says it."""


async def schedule_action(ui: Ui, request: Request) -> Response:
    """``POST /schedules/{id}/{action}``: pause, unpause or trigger a schedule, confirmed."""
    form = await _checked_form(ui, request)
    if isinstance(form, Response):
        return form
    action = request.path_params["action"]
    if action not in SCHEDULE_ACTIONS:
        return ui.error(request, 404, f"no schedule action {action!r}")
    schedule = get_schedule(request.path_params["schedule_id"], world=ui.world)
    try:
        info = await schedule.describe()
    except ScheduleNotFoundError:
        return ui.error(request, 404, f"no schedule {schedule.id!r} in this world")
    if form.get("confirm") != "yes":
        return ui.page(
            request,
            "confirm_schedule.html",
            info=info,
            action=action,
            effect=SCHEDULE_ACTIONS[action],
        )
    if action == "pause":
        await schedule.pause("paused from wf ui")
    elif action == "unpause":
        await schedule.unpause()
    else:
        run = await schedule.trigger()
        if run is not None:
            return RedirectResponse(app_url(request.scope, f"/runs/{quote(run.id, safe='')}"), 303)
    return RedirectResponse(app_url(request.scope, "/schedules"), 303)


def _safe_next(target: str) -> str:
    """``target`` if it is a path inside this app, else ``/`` (no open redirect)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


async def login_page(ui: Ui, request: Request) -> Response:
    """``/login``: a form taking the token; a right one sets the session cookie."""
    if ui.guard.token is None:
        return RedirectResponse(app_url(request.scope, "/"), status_code=303)
    target = _safe_next(request.query_params.get("next", "/"))
    if request.method == "GET":
        return ui.page(request, "login.html", next=target, failed=False)
    form = await _checked_form(ui, request)
    if isinstance(form, Response):
        return form
    target = _safe_next(form.get("next", "/"))
    if not ui.guard.check_token(form.get("token", "")):
        return ui.page(request, "login.html", 401, next=target, failed=True)
    response = RedirectResponse(app_url(request.scope, target), status_code=303)
    response.set_cookie(
        COOKIE,
        ui.guard.session,
        httponly=True,
        samesite="strict",
        path=root_path(request.scope) or "/",  # the mount's pages only
        secure=request.url.scheme == "https",  # behind TLS, never sent in clear
    )
    return response


async def logout(ui: Ui, request: Request) -> Response:
    """``POST /logout``: forget the session cookie."""
    form = await _checked_form(ui, request)
    if isinstance(form, Response):
        return form
    target = "/login" if ui.guard.token else "/"
    response = RedirectResponse(app_url(request.scope, target), status_code=303)
    response.delete_cookie(COOKIE, path=root_path(request.scope) or "/")
    return response
