"""A `phx_join` as Realtime reads it (RealtimeWeb.RealtimeChannel.join); no I/O.

What the join asks for (its token, privacy, broadcast options, Postgres Changes bindings) and
the refusals that need no database; the socket checks the token and the private channel's
policies, and answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devkit.realtime.bindings import Binding, BindingError, binding_id, parse_binding

TOPIC_PREFIX = "realtime:"


@dataclass(frozen=True)
class JoinRequest:
    """A join's payload. `bindings` is empty when one of those requested cannot be parsed:
    `binding_error` says why, in Realtime's words."""

    access_token: str | None  # the join's own token; None: the socket's key
    private: bool
    self_broadcast: bool
    ack_broadcast: bool
    presence: bool
    replay: bool
    requested: list[Any]  # config.postgres_changes as sent, without nulls
    bindings: list[Binding]
    binding_error: str | None

    def answered(self) -> list[Any]:
        """Every binding asked for, with its id, as Realtime answers the join (even one it
        then refuses)."""
        return [{**p, "id": binding_id(p)} if isinstance(p, dict) else p for p in self.requested]


def topic_refusal(topic: str) -> str | None:
    """Why a join of `topic` is refused before anything else is read, if it is."""
    if not topic.startswith(TOPIC_PREFIX):
        return "unmatched topic"
    if topic == TOPIC_PREFIX:
        return "TopicNameRequired: You must provide a topic name"
    return None


def read_join(payload: Any) -> JoinRequest:
    """The join's payload; what is missing or of the wrong shape reads as Realtime's default."""
    payload = payload if isinstance(payload, dict) else {}
    config = _object(payload.get("config"))
    broadcast = _object(config.get("broadcast"))
    presence = _object(config.get("presence"))
    token = payload.get("access_token") or payload.get("user_token")
    if not isinstance(token, str) or token.startswith("sb_"):
        token = None
    raw = config.get("postgres_changes")
    requested = [p for p in raw if p is not None] if isinstance(raw, list) else []
    bindings: list[Binding] = []
    error = None
    for params in requested:
        try:
            bindings.append(parse_binding(params))
        except BindingError as refused:
            error = error or str(refused)
    return JoinRequest(
        access_token=token,
        private=flexible_bool(config.get("private", False)),
        self_broadcast=flexible_bool(broadcast.get("self", False)),
        ack_broadcast=flexible_bool(broadcast.get("ack", False)),
        presence=flexible_bool(presence.get("enabled", False)),
        replay="replay" in broadcast,
        requested=requested,
        bindings=[] if error else bindings,
        binding_error=error,
    )


def replay_refusal(private: bool) -> str:
    reason = (
        "Replay is not allowed for public channels"
        if not private
        else "Replay is not available on this development server"
    )
    return f"UnableToReplayMessages: {reason}"


def flexible_bool(value: Any) -> bool:
    """Realtime's FlexibleBoolean: true, "true" (any case) and 1 are true."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True or value == 1


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
