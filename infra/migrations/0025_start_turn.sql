-- What starts a turn, in one statement (turns/start.py, infra/store/admission.py): the sender's
-- turns per minute, their daily token budget when one is set, the chat's job slot, their turns
-- still running though their job was deleted, the chat being theirs or theirs as a member,
-- their turns that have not ended, the user's message and, when the slot was free, the reply,
-- `streaming`. Before, these were seven round trips (BEGIN, five statements, COMMIT), each
-- statement planned anew (no prepared statements: transaction poolers hand each transaction to
-- any backend); a plpgsql function keeps its statements' plans for the session, and the whole
-- of it is one round trip, in autocommit one transaction.
--
-- A refusal raises, so the statement (or the caller's transaction) rolls back and nothing of
-- the request is stored, its time in the limit included; SQLSTATEs of class HF, which
-- infra/store/admission.py maps to its exceptions, with the seconds to wait in DETAIL:
--   HF001 turns per minute, HF002 daily tokens, HF003 turns that have not ended,
--   HF004 the chat is not the sender's, HF005 the message id is taken,
--   HF006 the slot is taken and the caller asked to be told (it contends in a transaction).
-- The one implementation of each check: the Python statements they replace are gone, and
-- what else needs one calls the same function (handoff.admit for chats per minute,
-- handoff.take_slot for a slot freed meanwhile, handoff.tokens_today for the usage route).

-- The per-user limits (infra/store/limits.py): locks the user's row of handoff.user_limits
-- (the user's other requests wait until this transaction ends), then adds `p_count` times of
-- now while no more than `p_limit` fall within the last `p_window_s` seconds. NULL: admitted;
-- else the seconds until the time whose leaving the window makes room (1 when none will).
create or replace function handoff.admit(
  p_user_id uuid, p_counted text, p_limit integer, p_count integer, p_window_s integer
) returns double precision
language plpgsql security definer set search_path = '' as $$
declare
  v_now timestamptz := statement_timestamp();
  v_window interval := make_interval(secs => p_window_s);
  v_times timestamptz[];
begin
  if p_counted not in ('turns', 'chats') then
    raise exception 'handoff.admit counts turns or chats, not %', p_counted;
  end if;
  select case when p_counted = 'turns' then l.turns else l.chats end into v_times
  from handoff.user_limits l where l.user_id = p_user_id for update;
  if not found then
    -- The user's first request: a concurrent first one inserts too, and this one waits.
    insert into handoff.user_limits (user_id) values (p_user_id) on conflict (user_id) do nothing;
    select case when p_counted = 'turns' then l.turns else l.chats end into v_times
    from handoff.user_limits l where l.user_id = p_user_id for update;
  end if;
  v_times := array(select t from unnest(v_times) t where t > v_now - v_window order by t desc);
  if cardinality(v_times) + p_count > p_limit then
    return coalesce(
      extract(epoch from v_times[greatest(p_limit - p_count, 0) + 1] + v_window - v_now), 1);
  end if;
  v_times := v_times[1:p_limit - p_count] || array_fill(v_now, array[p_count]);
  if p_counted = 'turns' then
    update handoff.user_limits set turns = v_times where user_id = p_user_id;
  else
    update handoff.user_limits set chats = v_times where user_id = p_user_id;
  end if;
  return null;
end
$$;

-- The user's tokens of today (UTC), summed from public.reply_usage (infra/store/usage.py), and
-- when the day renews, by the database's clock.
create or replace function handoff.tokens_today(p_user_id uuid)
returns table (tokens bigint, renews_at timestamptz, now timestamptz)
language plpgsql stable security definer set search_path = '' as $$
declare
  v_starts timestamptz :=
    date_trunc('day', statement_timestamp() at time zone 'UTC') at time zone 'UTC';
begin
  return query
  select coalesce(sum(u.input_tokens + u.output_tokens), 0)::bigint, v_starts + interval '1 day',
         statement_timestamp()
  from public.reply_usage u
  where u.user_id = p_user_id and u.created_at >= v_starts;
end
$$;

-- Take the chat's slot for a quick path (infra/store/slots.py): waits for a concurrent taker
-- to commit, then takes it or finds it taken. Runs before the chat is known to be the caller's:
-- if it is not, the caller's transaction rolls this back. The `on conflict ... where` repeats
-- the slot's partial unique index (tests/infra/test_statuses.py checks it).
create or replace function handoff.take_slot(
  p_chat_id uuid, p_assistant_id text, p_reply_id uuid, p_event text, p_job_key text,
  p_run_id text, p_sender_id uuid
) returns boolean
language plpgsql security definer set search_path = '' as $$
declare
  v_id uuid;
begin
  insert into public.job_runs
    (chat_id, assistant_id, root_message_id, status, kind, event_name, idempotency_key, run_id,
     payload, sender_id)
  select p_chat_id, p_assistant_id, p_reply_id, 'processing', 'quick', p_event, p_job_key,
         p_run_id, '{}'::jsonb, p_sender_id
  where exists (select 1 from public.chat where id = p_chat_id)
  on conflict (chat_id, assistant_id) where status in ('queued', 'processing', 'paused')
  do nothing
  returning id into v_id;
  return v_id is not null;
end
$$;

-- A turn's start, or (no `p_reply_id`) a message posted to a shared chat that starts none.
-- True when the turn took the chat's slot: its reply is then inserted, `streaming`. With
-- `p_slot_taken_aborts`, a taken slot raises HF006 and nothing is stored; without, the caller's
-- transaction contends for it (turns/start.py) and inserts the reply as that ends.
create or replace function handoff.start_turn(
  p_chat_id uuid,
  p_user_id uuid,
  p_assistant_id text,
  p_message_id uuid,
  p_content text,
  p_metadata jsonb,       -- the user's message's
  p_stored boolean,       -- the message exists already (a reply asked for again): checks only
  p_turns integer,        -- counted against the turns per minute
  p_replies integer,      -- counted against the turns that have not ended
  p_replaced text[],      -- assistants whose active job the message cancels or joins
  p_per_minute integer,
  p_window_s integer,
  p_max_active integer,
  p_daily_tokens bigint,  -- NULL: no budget
  p_lease_s double precision,
  p_job_lease_s double precision,
  p_job_key text,
  p_run_id text,
  p_event text,
  p_reply_id uuid,        -- NULL: a post, no turn, no slot
  p_reply_metadata jsonb,
  p_slot_taken_aborts boolean
) returns boolean
language plpgsql security definer set search_path = '' as $$
declare
  v_wait double precision;
  v_today record;
  v_took boolean := false;
  v_erased bigint := 0;
  v_visible boolean;
  v_admitted boolean;
  v_inserted boolean;
begin
  v_wait := handoff.admit(p_user_id, 'turns', p_per_minute, p_turns, p_window_s);
  if v_wait is not null then
    raise exception using errcode = 'HF001', message = 'too many turns', detail = v_wait;
  end if;
  if p_daily_tokens is not null then
    select * into v_today from handoff.tokens_today(p_user_id);
    if v_today.tokens >= p_daily_tokens then
      raise exception using errcode = 'HF002', message = 'daily tokens spent',
        detail = extract(epoch from v_today.renews_at - v_today.now);
    end if;
  end if;
  if p_reply_id is not null then
    v_took := handoff.take_slot(
      p_chat_id, p_assistant_id, p_reply_id, p_event, p_job_key, p_run_id, p_user_id);
    if not v_took and p_slot_taken_aborts then
      raise exception using errcode = 'HF006', message = 'slot taken';
    end if;
    -- A run that died never ends its row: a quick path's counts for its lease, a background
    -- run's for the background's (infra/store/erased_turns.py).
    select count(*) into v_erased from handoff.erased_turn e
    where e.user_id = p_user_id
      and e.erased_at > now() - make_interval(
        secs => case when e.kind = 'quick' then p_lease_s else p_job_lease_s end);
  end if;
  -- In one statement, so a member removed meanwhile sends nothing: the chat is the sender's
  -- or they are a member, and their turns that have not ended (jobs whose `sender_id` is
  -- theirs, in any chat) leave room for `p_replies`; this turn's own job does not count (its
  -- slot may be taken already), nor the slots' jobs of the assistants in `p_replaced`, nor a
  -- quick job silent past its lease (taken for dead).
  with visible as (
    select c.id from public.chat c
    where c.id = p_chat_id
      and (c.user_id = p_user_id or exists (
        select 1 from public.chat_member m where m.chat_id = c.id and m.user_id = p_user_id))
  ), admitted as (
    select count(*) + v_erased + p_replies <= p_max_active as ok
    from public.job_runs j
    where j.sender_id = p_user_id
      and j.status = any (handoff.unfinished_statuses())
      and j.idempotency_key <> p_job_key
      and not (j.kind = 'quick' and j.updated_at < now() - make_interval(secs => p_lease_s))
      and not (j.chat_id = p_chat_id and j.assistant_id = any (p_replaced)
               and j.status = any (handoff.slot_statuses()))
  ), inserted as (
    insert into public.message
      (id, chat_id, assistant_id, role, content, status, metadata, sender_id)
    select p_message_id, v.id, p_assistant_id, 'user', p_content, 'completed', p_metadata,
           p_user_id
    from visible v, admitted a
    where a.ok and not p_stored
    on conflict (id) do nothing
    returning id
  )
  select exists (select 1 from visible), a.ok, p_stored or exists (select 1 from inserted)
  into v_visible, v_admitted, v_inserted
  from admitted a;
  if not v_visible then
    raise exception using errcode = 'HF004', message = 'chat not found';
  end if;
  if not v_admitted then
    raise exception using errcode = 'HF003', message = 'too many active turns';
  end if;
  if not v_inserted then
    raise exception using errcode = 'HF005', message = 'duplicate message';
  end if;
  if v_took then
    insert into public.message
      (id, chat_id, assistant_id, role, content, status, parent_message_id, metadata)
    values (p_reply_id, p_chat_id, p_assistant_id, 'assistant', '', 'streaming', p_message_id,
            p_reply_metadata);
  end if;
  return v_took;
end
$$;

revoke all on function handoff.admit(uuid, text, integer, integer, integer),
  handoff.tokens_today(uuid),
  handoff.take_slot(uuid, text, uuid, text, text, text, uuid),
  handoff.start_turn(uuid, uuid, text, uuid, text, jsonb, boolean, integer, integer, text[],
    integer, integer, integer, bigint, double precision, double precision, text, text, text,
    uuid, jsonb, boolean)
  from public, anon, authenticated;
