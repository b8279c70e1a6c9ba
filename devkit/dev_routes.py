"""What `handoff dev` serves besides the app: the chat page (with supabase-js, vendored), the
status sets it asks about (made from infra/store/statuses.py), its session (the demo user's token
and the dev project's anon key), the SSE fallback of the change feed, the replies' timelines.

None of this is deployed: on Supabase the page signs in with supabase-js and subscribes to
Realtime, as it subscribes here to the dev server's Realtime endpoint.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from devkit import changes, dev_users, timeline
from handlers.errors import ApiError
from infra.store import statuses

PAGE_DIR = Path(__file__).resolve().parent / "dev_page"
NO_STORE = {"Cache-Control": "no-store"}
# What `?as=` answers when it names no e-mail address (nothing of it is echoed).
BAD_EMAIL = "as: not an e-mail address; name the local user by theirs, as in ?as=bob@example.com."


def status_sets() -> dict[str, tuple[str, ...]]:
    """Every set of statuses infra/store/statuses.py defines, by its name there."""
    return {
        name: value
        for name, value in vars(statuses).items()
        if name.endswith("_STATUSES") and isinstance(value, tuple)
    }


def statuses_module() -> str:
    """The status sets as the ES module the page imports (`/dev/statuses.js`), each a frozen
    array under its Python name: the page takes them from here rather than keep a copy."""
    header = "// Made by handoff dev from infra/store/statuses.py; not a file of the page.\n"
    return header + "".join(
        f"export const {name} = Object.freeze({json.dumps(list(values))});\n"
        for name, values in status_sets().items()
    )


@dataclass(frozen=True)
class DevSession:
    """The demo user the page and `handoff chat` act as, unless they ask for another (`?as=`);
    `mint` signs a fresh token for a user (their id and e-mail). `anon_key`: the project's anon
    key, which supabase-js and supabase-py connect to Realtime with. The session names the
    deployment's default assistant too."""

    user_id: UUID
    email: str
    chat_id: UUID
    mint: Callable[[UUID, str], str]
    anon_key: str


class SessionBody(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    token: str
    user_id: UUID
    email: str
    chat_id: UUID
    anon_key: str
    assistant_id: str


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _is_loopback_name(host: str | None) -> bool:
    """`localhost`, a name under it (browsers resolve those to loopback themselves, RFC 6761),
    a loopback address, or the unspecified one (`--host 0.0.0.0` prints it in the banner, and
    a connection to it reaches this machine): the Host of a request to this machine by its own
    name."""
    if not host:
        return False
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def install_dev_routes(
    app: FastAPI, session: DevSession, traces: timeline.Timeline | None = None
) -> None:
    """The page and its routes; `traces`: the turns' traces the timeline route serves."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(PAGE_DIR / "index.html", headers=NO_STORE)

    # Before the page's static mount, which would otherwise answer this path with a 404.
    @router.get("/dev/statuses.js", include_in_schema=False)
    async def status_sets_module() -> Response:
        return Response(statuses_module(), media_type="text/javascript", headers=NO_STORE)

    @router.get("/api/dev/session", response_model=SessionBody, response_model_by_alias=True)
    async def dev_session(
        request: Request, as_email: Annotated[str | None, Query(alias="as")] = None
    ) -> SessionBody:
        """A token for the demo user, or with `?as=<email>` for that local user (made if
        missing, with a chat of their own), handed only to this machine: a server started with
        `--host 0.0.0.0` must not give everyone on the network the demo user's chats. And only
        to a page of this machine: a site whose name a DNS answer pointed at 127.0.0.1 (DNS
        rebinding) runs in the browser here, but its requests name its own host."""
        if request.client is None or not _is_loopback(request.client.host):
            raise ApiError(404, "not_found", "Not Found")
        if not _is_loopback_name(request.url.hostname):
            raise ApiError(404, "not_found", "Not Found")
        user_id, email, chat_id = session.user_id, session.email, session.chat_id
        if as_email is not None:
            try:
                email = dev_users.local_email(as_email)
            except dev_users.NotAnEmail:
                raise ApiError(422, "invalid_request", BAD_EMAIL) from None
            local = await dev_users.local_user(await request.app.state.services.pool(), email)
            user_id, email, chat_id = local.id, local.email, local.chat_id
        return SessionBody(
            token=session.mint(user_id, email),
            user_id=user_id,
            email=email,
            chat_id=chat_id,
            anon_key=session.anon_key,
            assistant_id=request.app.state.assistants.default.id,
        )

    app.include_router(router)
    app.include_router(changes.router)
    timeline.install(app, traces)
    app.mount("/dev", StaticFiles(directory=PAGE_DIR), name="dev-page")
