-- A new message's route, its turn's start and the head its turn continues, in one round trip
-- (turns/opening.py, infra/store/admission.py). Before, three statements on two connections:
-- the route (the chat's assistants), then `handoff.start_turn`, with the history read beside
-- them; the route and the start one after the other stood between the request and its first
-- token, and each connection's first statement after a pause woke a backend of its own.
--
-- The request says who most likely answers: the assistant it names (`named`: it must take
-- part in the chat), or the deployment's default when it names none (`default`: it must be the
-- chat's default, in a chat not shared). When the chat confirms it, the turn starts as
-- `handoff.start_turn` starts it and its head is read as `handoff.active_checkpoint` reads it;
-- else only the route comes back, and the caller starts the turn of whoever answers.

-- What routing reads of a chat (turns/routing.py): its assistants, the earliest added first,
-- with which is its default, and whether it has members; one row if `p_user_id` owns the chat
-- or is a member of it, none if not.
create or replace function handoff.chat_route(p_chat_id uuid, p_user_id uuid)
returns table (assistant_ids text[], defaults boolean[], shared boolean)
language plpgsql stable set search_path = '' as $$
begin
  return query
  select
    coalesce(array_agg(ca.assistant_id order by ca.added_at, ca.assistant_id)
      filter (where ca.assistant_id is not null), '{}'),
    coalesce(array_agg(ca.is_default order by ca.added_at, ca.assistant_id)
      filter (where ca.assistant_id is not null), '{}'),
    exists (select 1 from public.chat_member m where m.chat_id = c.id)
  from public.chat c
  left join public.chat_assistant ca on ca.chat_id = c.id
  where c.id = p_chat_id
    and (c.user_id = p_user_id or exists (
      select 1 from public.chat_member m where m.chat_id = c.id and m.user_id = p_user_id))
  group by c.id;
end
$$;

-- The route (`visible`: the chat is the sender's or they are a member; a chat with no
-- assistants written down has `p_fallback` alone, as its default); `started`: the turn of
-- `p_assistant_id` started (`handoff.start_turn`'s refusals raise as there) and the head
-- columns are `handoff.active_checkpoint`'s; `slot_taken`: the route was confirmed but the
-- chat's slot is taken, nothing is stored, and the caller contends for it in a transaction.
create or replace function handoff.open_turn(
  p_expect text,          -- 'named', 'default', or NULL: the route alone
  p_fallback text,
  p_thread_id text,
  p_chat_id uuid,
  p_user_id uuid,
  p_assistant_id text,
  p_message_id uuid,
  p_content text,
  p_metadata jsonb,
  p_turns integer,
  p_replies integer,
  p_replaced text[],
  p_per_minute integer,
  p_window_s integer,
  p_max_active integer,
  p_daily_tokens bigint,
  p_lease_s double precision,
  p_job_lease_s double precision,
  p_job_key text,
  p_run_id text,
  p_event text,
  p_reply_id uuid,
  p_reply_metadata jsonb
) returns table (
  visible boolean, assistant_ids text[], defaults boolean[], shared boolean, started boolean,
  slot_taken boolean, branch text, head text, thread_id text, checkpoint jsonb,
  checkpoint_ns text, checkpoint_id text, parent_checkpoint_id text, metadata jsonb,
  channel_values bytea[], pending_writes bytea[]
)
language plpgsql security definer set search_path = '' as $$
#variable_conflict use_column
declare
  v_ids text[];
  v_defaults boolean[];
  v_shared boolean;
  v_visible boolean;
  v_answers boolean;
  v_started boolean := false;
  v_slot_taken boolean := false;
begin
  select r.assistant_ids, r.defaults, r.shared into v_ids, v_defaults, v_shared
  from handoff.chat_route(p_chat_id, p_user_id) r;
  -- Not found: not the sender's chat (or no such sender), and the caller's start says which.
  v_visible := found;
  v_answers := v_visible and case p_expect
    when 'named' then p_assistant_id = any (v_ids) or (
      cardinality(v_ids) = 0 and p_assistant_id = p_fallback)
    when 'default' then not v_shared and p_assistant_id = coalesce(
      v_ids[array_position(v_defaults, true)], v_ids[1], p_fallback)
    else false
  end;
  if v_answers then
    begin
      perform handoff.start_turn(
        p_chat_id, p_user_id, p_assistant_id, p_message_id, p_content, p_metadata, false,
        p_turns, p_replies, p_replaced, p_per_minute, p_window_s, p_max_active,
        p_daily_tokens, p_lease_s, p_job_lease_s, p_job_key, p_run_id, p_event, p_reply_id,
        p_reply_metadata, true);
      v_started := true;
    exception when sqlstate 'HF006' then
      v_slot_taken := true;
    end;
  end if;
  if v_started then
    return query select true, v_ids, v_defaults, v_shared, true, false, a.*
      from handoff.active_checkpoint(p_chat_id, p_assistant_id, p_thread_id) a;
  else
    return query select v_visible, v_ids, v_defaults, v_shared, false, v_slot_taken,
      null::text, null::text, null::text, null::jsonb, null::text, null::text, null::text,
      null::jsonb, null::bytea[], null::bytea[];
  end if;
end
$$;

revoke all on function handoff.chat_route(uuid, uuid),
  handoff.open_turn(text, text, text, uuid, uuid, text, uuid, text, jsonb, integer, integer,
    text[], integer, integer, integer, bigint, double precision, double precision, text, text,
    text, uuid, jsonb)
  from public, anon, authenticated;
