"""The websocket at /realtime/v1/websocket: the handshake (protocol version, API key), then one
`Session` per connection, on the app's hub."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, WebSocket
from fastapi.responses import JSONResponse

from devkit import changes
from devkit.realtime.hub import Hub
from devkit.realtime.protocol import SERIALIZERS
from devkit.realtime.socket import Session
from devkit.realtime.tokens import RealtimeTokens, TokenRefused
from infra.runtime import Services

REALTIME_PATH = "/realtime/v1/websocket"
router = APIRouter()


async def realtime_hub(app: FastAPI) -> Hub:
    """The app's hub, made on first use, on the app's change feed."""
    hub: Hub | None = getattr(app.state, "realtime_hub", None)
    if hub is None:
        services: Services = app.state.services
        feed = await changes.change_feed(app, services)
        hub = Hub(await services.pool(), feed, RealtimeTokens(services.settings))
        app.state.realtime_hub = hub
        # Before the feed's own hook (added first), which releases the slot.
        app.state.on_shutdown.insert(0, hub.close)
    return hub


@router.websocket(REALTIME_PATH)
async def realtime_socket(websocket: WebSocket) -> None:
    """Realtime's websocket endpoint, as supabase-js and supabase-py connect to it."""
    vsn = websocket.query_params.get("vsn", "1.0.0")
    serializer = SERIALIZERS.get(vsn)
    if serializer is None:
        await _deny(websocket, 403, f"unsupported protocol version {vsn!r}: 1.0.0 or 2.0.0")
        return
    hub = await realtime_hub(websocket.app)
    token = websocket.headers.get("x-api-key") or websocket.query_params.get("apikey")
    try:
        await hub.tokens.verify(token)
    except TokenRefused as refused:
        await _deny(websocket, 401, refused.http_message)
        return
    await websocket.accept()
    session = Session(websocket, serializer, hub, str(token))
    hub.sessions.add(session)
    try:
        await session.run()
    finally:
        hub.sessions.discard(session)


async def _deny(websocket: WebSocket, status: int, message: str) -> None:
    """The handshake's HTTP answer, as Realtime's error handler sends it (where the server can
    send one; else the handshake is refused with 403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"error": message}, status))
    else:
        await websocket.close(1008, message)


def install_realtime(app: FastAPI) -> None:
    """Serve Realtime's websocket on `app` (the development app)."""
    app.include_router(router)
