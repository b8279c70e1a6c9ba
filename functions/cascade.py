"""`cascade-regeneration`: an edit's cascade (turns/cascade.py) as durable steps.

Triggered by `chat/cascade.requested` (ids only; its event id is the cascade's), it waits for
the edit's own replies to end, plans the dependents once (a step output, so a replay plans the
same), then regenerates them one at a time: a step per dependent, `regenerate-<reply id>`,
then a wait for that turn's job to end (`chat/reply.ended`, with the database read whenever a
wait ends without it: functions/wakes.py), since its new text is context for the next. Past
CASCADE_LIMIT regenerations it asks the editor (`more-<n>`): approved, it goes on for as many
again; declined or unanswered within APPROVAL_TIMEOUT_S, the rest stay as they are. A cancel
(`chat/cascade.cancel`) stops the run at its next step; the row says so first, so a step that
runs anyway starts nothing. One cascade per chat runs its steps at a time.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any, Literal, NotRequired, TypedDict

import inngest

from agent.assistants import Assistants
from functions.wakes import wait_for_wake
from infra.events import (
    CASCADE_CANCEL_EVENT,
    CASCADE_DECISION_EVENT,
    CASCADE_EVENT,
    REPLY_ENDED_EVENT,
)
from infra.runtime import Services
from infra.settings import Settings
from infra.store.ids import ChatId
from turns.cascade import Cascade

logger = logging.getLogger(__name__)

FUNCTION_ID = "cascade-regeneration"


class CascadeOutcome(TypedDict):
    status: Literal["completed", "stopped", "declined"]
    regenerated: int
    remaining: NotRequired[int]


def create_cascade(
    client: inngest.Inngest, services: Services, assistants: Assistants
) -> inngest.Function[Any]:
    settings = services.settings

    @client.create_function(
        fn_id=FUNCTION_ID,
        trigger=inngest.TriggerEvent(event=CASCADE_EVENT),
        concurrency=[inngest.Concurrency(limit=1, key="event.data.chatId")],
        cancel=[
            inngest.Cancel(
                event=CASCADE_CANCEL_EVENT, if_exp="event.data.cascadeId == async.data.cascadeId"
            )
        ],
        retries=4,
    )
    async def cascade_regeneration(ctx: inngest.Context) -> CascadeOutcome:
        try:
            cascade_id = uuid.UUID(str(ctx.event.data["cascadeId"]))
            chat_id = ChatId(uuid.UUID(str(ctx.event.data["chatId"])))
        except (KeyError, ValueError) as exc:
            raise inngest.NonRetriableError("invalid chat/cascade.requested data") from exc
        cascade = Cascade(services, assistants, client, cascade_id, chat_id)
        for reply_id in await ctx.step.run("edit-replies", cascade.edit_replies):
            await _until_ended(ctx, settings, cascade, reply_id)
        planned = await ctx.step.run("plan", cascade.plan)
        allowed, done = settings.cascade_limit, 0
        for i, dependent in enumerate(planned):
            if i == allowed:
                rest = [p["replyId"] for p in planned[i:]]
                if not await _more(ctx, settings, cascade, i, rest):
                    return {"status": "declined", "regenerated": done, "remaining": len(rest)}
                allowed += settings.cascade_limit
            started = await ctx.step.run(
                f"regenerate-{dependent['replyId']}", partial(cascade.regenerate, dependent)
            )
            if started["stop"]:
                logger.info("cascade stopped", extra={"cascade_id": str(cascade_id)})
                return {"status": "stopped", "regenerated": done}
            if started["replyId"] is not None:
                done += 1
                await _until_ended(ctx, settings, cascade, started["replyId"])
        await ctx.step.run("finish", cascade.finish)
        return {"status": "completed", "regenerated": done}

    return cascade_regeneration


async def _more(
    ctx: inngest.Context, settings: Settings, cascade: Cascade, i: int, rest: list[str]
) -> bool:
    """The card after `i` regenerations: whether the editor lets the cascade go on."""
    if not await ctx.step.run(f"ask-more-{i}", partial(cascade.ask_more, len(rest))):
        return False
    await wait_for_wake(
        ctx,
        f"more-{i}",
        event=CASCADE_DECISION_EVENT,
        if_exp=f"async.data.cascadeId == '{cascade.cascade_id}'",
        timeout_s=settings.approval_timeout_s,
        settings=settings,
        still_waiting=cascade.awaits_decision,
    )
    return bool(await ctx.step.run(f"settle-more-{i}", partial(cascade.settle_more, rest)))


async def _until_ended(
    ctx: inngest.Context, settings: Settings, cascade: Cascade, reply_id: str
) -> None:
    """Return once the reply's job has ended (at most PAUSE_TIMEOUT_S, a paused turn's)."""
    if await ctx.step.run(f"ended-{reply_id}", partial(cascade.ended, reply_id)):
        return
    await wait_for_wake(
        ctx,
        f"reply-{reply_id}",
        event=REPLY_ENDED_EVENT,
        if_exp=f"async.data.messageId == '{reply_id}'",
        timeout_s=settings.pause_timeout_s,
        settings=settings,
        still_waiting=partial(cascade.running, reply_id),
    )
