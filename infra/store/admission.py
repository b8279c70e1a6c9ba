"""A user's message, admitted: stored, as the service, only while the sender owns the chat or is
a member of it and the sender's turns that have not ended are under their limit, in the
transaction that takes the limit's lock (infra/store/limits.py). The Data API roles may not
write messages (migration 0022): a member could otherwise rewrite another's."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.types.json import Jsonb

from infra.db import Conn
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.limits import ACTIVE_TURNS_RETRY_S, TooManyActiveTurns, TurnLimits
from infra.store.messages import MessageMetadata
from infra.store.statuses import SLOT_STATUSES, UNFINISHED_STATUSES, with_statuses

# The `assistant_id` of a message posted to a shared chat that names no assistant: every
# assistant of the chat hears it at its next turn (infra/store/public_messages.py), none answers.
TO_CHAT = ""


class DuplicateMessage(RuntimeError):
    """A message with this id already exists."""


# As the service: the message goes in only if the sender owns the chat or is a member of it
# (checked here, in the same statement, so a member removed meanwhile sends nothing), and only
# while the sender's turns (jobs whose `sender_id` is theirs, in any chat) that have not ended
# leave room for the `replies` it starts (one per assistant it
# addresses) within `max_active` (infra/store/limits.py; the caller holds the user's row of
# handoff.user_limits). This turn's own job is not counted (its slot may be taken already), nor
# the jobs of the slots a message that interrupts cancels (`replaced`: those assistants').
# Turns whose job was deleted while they ran are counted by the caller, as the service
# (infra/store/erased_turns.py).
ADMIT_SQL = with_statuses(
    """
with visible as (
  select c.id from public.chat c
  where c.id = %(chat_id)s
    and (c.user_id = %(user_id)s or exists (
      select 1 from public.chat_member m where m.chat_id = c.id and m.user_id = %(user_id)s))
), admitted as (
  select count(*) + %(erased_running)s + %(replies)s <= %(max_active)s as ok
  from public.job_runs j
  where j.sender_id = %(user_id)s
    and j.status in ({unfinished})
    and j.idempotency_key <> %(job_key)s
    and not (j.kind = 'quick' and j.updated_at < now() - make_interval(secs => %(lease_s)s))
    and not (j.chat_id = %(chat_id)s and j.assistant_id = any(%(replaced)s)
             and j.status in ({slot}))
)""",
    unfinished=UNFINISHED_STATUSES,
    slot=SLOT_STATUSES,
)
STORE_USER_MESSAGE_SQL = (
    ADMIT_SQL  # noqa: S608 (constants only)
    + """, inserted as (
  insert into public.message
    (id, chat_id, assistant_id, role, content, status, metadata, sender_id)
  select %(message_id)s, v.id, %(assistant_id)s, 'user', %(content)s, 'completed', %(metadata)s,
         %(user_id)s
  from visible v, admitted a
  where a.ok
  on conflict (id) do nothing
  returning id
)
select exists (select 1 from visible) as visible, exists (select 1 from inserted) as inserted,
       a.ok as admitted
from admitted a
"""
)
# The same admission for a turn whose user message is stored already (a regenerated reply).
ADMIT_STORED_SQL = (
    ADMIT_SQL  # noqa: S608 (constants only)
    + """
select exists (select 1 from visible) as visible, a.ok as admitted, true as inserted
from admitted a
"""
)


async def store_user_message(
    conn: Conn,
    *,
    chat_id: ChatId,
    assistant_id: str,
    message_id: MessageId,
    content: str,
    user_id: UserId,
    job_key: str,
    limits: TurnLimits,
    replaced: Sequence[str] = (),
    addressees: Sequence[str] = (),
    stored: bool = False,
    erased_running: int = 0,
) -> bool:
    """Insert the user's message, as the service, with `user_id` its sender; False when the
    chat is neither theirs nor one they are a member of.

    TooManyActiveTurns when the user's turns that have not ended leave no room within
    `limits.max_active` for one reply per assistant of `addressees` (`assistant_id` alone when
    empty); `job_key` is this turn's own job, and the active jobs of the `replaced` assistants'
    slots, which the message cancels or joins, do not count; `erased_running`: the user's turns
    still running though their job was deleted. A message to several assistants records them all
    (`metadata.addressedTo`, in mention order). DuplicateMessage when the id is taken (a retried
    send). A message posted to a shared chat only (`assistant_id` TO_CHAT) starts no reply:
    `metadata.addressedTo` is empty. With `stored`, the message exists already (a reply asked
    for again): only the chat and the limit are checked."""
    to_chat = assistant_id == TO_CHAT
    metadata: MessageMetadata = (
        {"addressedTo": list(addressees)} if len(addressees) > 1 or to_chat else {}
    )
    params = {
        "chat_id": chat_id,
        "assistant_id": assistant_id,
        "message_id": message_id,
        "content": content,
        "user_id": user_id,
        "job_key": job_key,
        "lease_s": limits.lease_s,
        "replaced": list(replaced),
        "replies": 0 if to_chat else max(len(addressees), 1),
        "metadata": Jsonb(metadata),
        "max_active": limits.max_active,
        "erased_running": erased_running,
    }
    sql = ADMIT_STORED_SQL if stored else STORE_USER_MESSAGE_SQL
    row = await (await conn.execute(sql, params)).fetchone()
    if row is None or not row["visible"]:
        return False
    if not row["admitted"]:
        raise TooManyActiveTurns(ACTIVE_TURNS_RETRY_S)
    if not row["inserted"]:
        raise DuplicateMessage(message_id)
    return True
