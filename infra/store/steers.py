"""Messages sent with `multitaskStrategy: steer`: they join the chat's running background job.

The user's message is stored as any other (under RLS, in the respond request's transaction);
the job row keeps its id in `metadata.steered` ({id}, in the order they came; its text stays in
the message row alone, so deleting the message erases it: migration 0019), and the
job's next model round adds each one its thread does not hold yet to the thread, by message id,
so a retried or replayed round adds none twice (turns/rounds.py). A job completes only once its
thread holds every message steered into it (`pending`, asked by turns/endings.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg.types.json import Jsonb

from infra.db import Conn
from infra.store.ids import ChatId, MessageId
from infra.store.job_metadata import SteeredMessage
from infra.store.statuses import SLOT_STATUSES, with_statuses

# Only a background job (a quick path has no boundary to take a message at); one of the
# service's writes, as the Data API roles cannot write jobs.
STEER_SQL = with_statuses(
    """
update public.job_runs
set metadata = metadata || jsonb_build_object(
      'steered', coalesce(metadata -> 'steered', '[]'::jsonb) || %(message)s::jsonb),
    updated_at = updated_at
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s and kind <> 'quick'
  and status in ({slot})
returning idempotency_key, root_message_id
""",
    slot=SLOT_STATUSES,
)
MARK_SQL = """
update public.message
set metadata = metadata || jsonb_build_object('steeredInto', %s::text)
where id = %s
"""
# The text from the message row; jobs stored before steered ids alone carry it themselves.
STEERED_SQL = """
select s.v ->> 'id' as id, coalesce(m.content, s.v ->> 'content', '') as content
from public.job_runs j
cross join jsonb_array_elements(coalesce(j.metadata -> 'steered', '[]'::jsonb))
  with ordinality s(v, n)
left join public.message m on m.id = (s.v ->> 'id')::uuid
where j.idempotency_key = %s
order by s.n
"""

# Whether a message steered into the job (infra/store/steers.py) is missing from the thread's
# messages; locks the job, so a message steered in later finds it completed.
STEERS_PENDING_SQL = """
select exists (
  select 1 from jsonb_array_elements(coalesce(metadata -> 'steered', '[]'::jsonb)) s
  where not (s ->> 'id' = any(%s::text[]))
) as pending
from public.job_runs where idempotency_key = %s
for update
"""


@dataclass(frozen=True)
class SteeredJob:
    """The running job a message joined."""

    job_key: str
    reply_id: MessageId


async def steer_into(
    conn: Conn, *, chat_id: ChatId, assistant_id: str, message_id: MessageId
) -> SteeredJob | None:
    """Give the stored user message to the chat's background job; None when there is none
    (idle, or a quick path still streaming)."""
    params = {
        "chat_id": chat_id,
        "assistant_id": assistant_id,
        "message": Jsonb([SteeredMessage(id=str(message_id))]),
    }
    row = await (await conn.execute(STEER_SQL, params)).fetchone()
    if row is None:
        return None
    await conn.execute(MARK_SQL, (str(row["root_message_id"]), message_id))
    return SteeredJob(row["idempotency_key"], MessageId(row["root_message_id"]))


async def steered(conn: Conn, job_key: str) -> list[SteeredMessage]:
    """The messages steered into the job, in the order they came, each with its text."""
    rows = await (await conn.execute(STEERED_SQL, (job_key,))).fetchall()
    return [SteeredMessage(id=r["id"], content=r["content"]) for r in rows]


async def pending(conn: Conn, job_key: str, in_thread: list[str]) -> bool:
    """Lock the job; whether a message steered into it is not among `in_thread`, the
    ids of the thread's messages."""
    row = await (await conn.execute(STEERS_PENDING_SQL, (in_thread, job_key))).fetchone()
    return row is not None and bool(row["pending"])
