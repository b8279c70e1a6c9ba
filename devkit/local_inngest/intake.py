"""The Event API half of the server: ``POST /e/{event_key}``, event ids and dedup."""

from __future__ import annotations

import hmac
import json
import time
import uuid
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from devkit.local_inngest.runs import JSONDict

_DEDUP_WINDOW_S = 24 * 3600.0


def normalize_event(item: object) -> JSONDict:
    """The event as the executor stores and delivers it; ``ValueError`` if malformed."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ValueError("each event must be an object with a non-empty string name")
    data = item.get("data") or {}
    event_id = item.get("id") or str(uuid.uuid4())
    ts = item.get("ts") or int(time.time() * 1000)
    if not isinstance(data, dict) or not isinstance(event_id, str) or not isinstance(ts, int):
        raise ValueError("event data must be an object, id a string and ts an integer")
    return {"name": item["name"], "data": data, "id": event_id, "ts": ts}


class EventLog:
    """Every accepted event by id, for dedup and replay (in memory, like everything here)."""

    def __init__(self) -> None:
        self._events: dict[str, tuple[float, JSONDict]] = {}

    def remember(self, event: JSONDict) -> bool:
        """Store ``event``; False when its id was already seen within the dedup window."""
        now = time.monotonic()
        seen = self._events.get(event["id"])
        if seen is not None and now - seen[0] < _DEDUP_WINDOW_S:
            return False
        self._events[event["id"]] = (now, event)
        return True

    def get(self, event_id: str) -> JSONDict:
        if event_id not in self._events:
            raise KeyError(f"unknown event id {event_id!r}")
        return self._events[event_id][1]


class Intake:
    """``POST /e/{event_key}`` exactly as ``Inngest.send`` posts it; ``accept`` gets each event."""

    def __init__(
        self, event_key: str, accept: Callable[[JSONDict], None], ready: Callable[[], bool]
    ) -> None:
        self._event_key = event_key
        self._accept = accept
        self._ready = ready
        self._refused = 0
        self.app = Starlette(routes=[Route("/e/{event_key}", self._post, methods=["POST"])])

    def refuse(self, count: int) -> None:
        self._refused += count

    async def _post(self, request: Request) -> JSONResponse:
        given = str(request.path_params["event_key"]).encode()
        if not hmac.compare_digest(given, self._event_key.encode()):
            return JSONResponse({"error": "event key not found", "status": 401}, 401)
        if self._refused > 0:
            self._refused -= 1
            return JSONResponse({"error": "unavailable (refuse_events)", "status": 503}, 503)
        if not self._ready():
            return JSONResponse({"error": "LocalInngest not started", "status": 503}, 503)
        try:
            raw = json.loads(await request.body())
            events = [normalize_event(item) for item in (raw if isinstance(raw, list) else [raw])]
        except ValueError as err:
            return JSONResponse({"error": str(err), "status": 400}, 400)
        for event in events:
            self._accept(event)
        return JSONResponse({"ids": [e["id"] for e in events], "status": 200})
