"""GET /api/usage: what the caller's replies used, per model and per chat, under their RLS."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated
from uuid import UUID

from fastapi import Query
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from handlers.deps import CurrentUser, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES
from handlers.errors import ApiError
from handlers.fields import NO_NUL
from infra.settings import ModelPrice
from infra.store import usage
from infra.store.access import act_as_service, user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId
from infra.store.usage import ChatModelTally, Tally

router = strict_router()

MAX_DAYS = 366
# An ISO 8601 date, or date and time with an optional offset (`Z`, `+02:00`): nothing looser
# (pydantic would take "0" for a Unix time).
ISO_MOMENT = r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?$"


class Figures(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    turns: int  # replies
    input_tokens: int
    output_tokens: int
    tool_calls: int  # tool calls that were answered
    # In USD, from MODEL_PRICES; null when a model in it has no price (or none are set).
    estimated_cost_usd: float | None


class ModelFigures(Figures):
    model: str | None  # `provider:model` (or `scripted`); null when unknown


class ChatFigures(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    chat_id: UUID
    title: str | None  # null once the chat is deleted: what it used still counts
    total: Figures
    models: list[ModelFigures]


class DailyBudget(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    tokens: int  # MAX_USER_DAILY_TOKENS
    used: int  # input and output tokens of today's replies (UTC)
    renews_at: datetime  # the next midnight UTC


class UsageReport(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    # The window the figures are of, [since, until), in UTC; null: unbounded.
    since: datetime | None
    until: datetime | None
    total: Figures
    models: list[ModelFigures]  # most tokens first
    chats: list[ChatFigures]  # most tokens first
    # Today's use of MAX_USER_DAILY_TOKENS; null when no budget is set.
    daily_budget: DailyBudget | None


def figures(tally: Tally, cost: float | None) -> Figures:
    return Figures(
        turns=tally.turns,
        input_tokens=tally.input_tokens,
        output_tokens=tally.output_tokens,
        tool_calls=tally.tool_calls,
        estimated_cost_usd=cost,
    )


def by_model(
    rows: Iterable[ChatModelTally], prices: Mapping[str, ModelPrice]
) -> tuple[Figures, list[ModelFigures]]:
    """The rows' total and their figures per model, most tokens first."""
    tallies: dict[str | None, Tally] = defaultdict(Tally)
    for row in rows:
        tallies[row.model] += row.tally
    models = [
        ModelFigures(
            model=model,
            **figures(tally, usage.estimated_cost(model, tally, prices)).model_dump(),
        )
        for model, tally in sorted(
            tallies.items(), key=lambda item: (-item[1].tokens, item[0] or "")
        )
    ]
    total = sum(tallies.values(), Tally())
    cost = usage.sum_costs(m.estimated_cost_usd for m in models) if prices else None
    return figures(total, cost), models


def report(
    rows: list[ChatModelTally],
    prices: Mapping[str, ModelPrice],
    *,
    since: datetime | None,
    until: datetime | None,
    budget: DailyBudget | None,
) -> UsageReport:
    total, models = by_model(rows, prices)
    per_chat: dict[ChatId, list[ChatModelTally]] = defaultdict(list)
    for row in rows:
        per_chat[row.chat_id].append(row)
    chats = []
    for chat_id, chat_rows in per_chat.items():
        chat_total, chat_models = by_model(chat_rows, prices)
        chats.append(
            ChatFigures(
                chat_id=chat_id, title=chat_rows[0].title, total=chat_total, models=chat_models
            )
        )
    chats.sort(key=lambda c: (-(c.total.input_tokens + c.total.output_tokens), str(c.chat_id)))
    return UsageReport(
        since=since, until=until, total=total, models=models, chats=chats, daily_budget=budget
    )


def window(
    since: str | None, until: str | None, days: int | None, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """[since, until) in UTC. A date is its midnight, a time without an offset is UTC; `days`
    is today (UTC) and the days before it."""
    if days is not None:
        if since is not None or until is not None:
            raise ApiError(422, "invalid_request", "days cannot be combined with since or until")
        midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight - timedelta(days=days - 1), None
    start, end = _utc("since", since), _utc("until", until)
    if start is not None and end is not None and start >= end:
        raise ApiError(422, "invalid_request", "since must be before until")
    return start, end


def _utc(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):  # no such day, or an offset past year 1 or 9999
        raise ApiError(422, "invalid_request", f"{name}: not a valid date or time") from None


@router.get(
    "/api/usage",
    response_model=UsageReport,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def get_usage(
    user: CurrentUser,
    services: ServicesDep,
    chat_id: Annotated[UUID | None, Query(alias="chatId")] = None,
    since: Annotated[
        str | None,
        Query(pattern=ISO_MOMENT, examples=["2025-06-01", "2025-06-01T08:00:00Z"]),
        NO_NUL,
    ] = None,
    until: Annotated[
        str | None,
        Query(pattern=ISO_MOMENT, examples=["2025-07-01", "2025-06-01T18:00:00Z"]),
        NO_NUL,
    ] = None,
    days: Annotated[int | None, Query(ge=1, le=MAX_DAYS)] = None,
) -> UsageReport:
    """What the caller's replies used: tokens, turns and tool calls, in all, per model and per
    chat (`chatId`: of that chat only), with a cost estimated from MODEL_PRICES.

    `since` (inclusive) and `until` (exclusive) are ISO dates or times, UTC unless they say
    otherwise; `days=N` is today (UTC) and the N - 1 days before. A reply counts from when its
    turn first recorded usage.
    """
    settings = services.settings
    start, end = window(since, until, days, datetime.now(UTC))
    async with user_transaction(await services.pool(), user.claims) as conn:
        if chat_id is not None:
            await require_chat(conn, ChatId(chat_id))
        rows = await usage.by_chat(
            conn,
            user.id,
            since=start,
            until=end,
            chat_id=ChatId(chat_id) if chat_id is not None else None,
        )
        budget = None
        if settings.max_user_daily_tokens is not None:
            # The budget's own count (handoff.tokens_today), which the Data API roles may not
            # call: as the service, for this user alone.
            await act_as_service(conn)
            today = await usage.today(conn, user.id)
            budget = DailyBudget(
                tokens=settings.max_user_daily_tokens, used=today.tokens, renews_at=today.renews_at
            )
    return report(rows, settings.model_prices, since=start, until=end, budget=budget)
