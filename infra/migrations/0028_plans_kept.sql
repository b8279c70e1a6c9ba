-- Statements planned once a session, not once a call. Nothing is prepared behind a transaction
-- pooler (infra/db.py): a statement sent on its own is planned every time it runs, and only a
-- plpgsql function keeps its statements' plans for the session. Even there, plpgsql keeps a
-- generic plan only when it estimates it no costlier than a plan made for the call's values;
-- where it does not, it plans the statement again at every call. Measured with
-- pg_stat_statements on PostgreSQL 15, per completed turn: 0.71 ms of planning inside
-- `handoff.open_turn` (0.24 ms of it for `handoff.active_checkpoint`'s read of the head), and
-- 0.3 to 0.4 ms for the reply's usage row alone, more than it took to run.
--
-- Every statement here finds its rows by key, so the generic plan is the one a call's values
-- would give. A `create or replace` of one of these functions drops its settings: set them
-- again there.

-- The start of a turn (migrations 0017, 0025 to 0027).
alter function handoff.open_turn(
  text, text, text, uuid, uuid, text, uuid, text, jsonb, integer, integer, text[], integer,
  integer, integer, bigint, double precision, double precision, text, text, text, uuid, jsonb
) set plan_cache_mode = force_generic_plan;
alter function handoff.start_turn(
  uuid, uuid, text, uuid, text, jsonb, boolean, integer, integer, text[], integer, integer,
  integer, bigint, double precision, double precision, text, text, text, uuid, jsonb, boolean
) set plan_cache_mode = force_generic_plan;
alter function handoff.admit(uuid, text, integer, integer, integer)
  set plan_cache_mode = force_generic_plan;
alter function handoff.take_slot(uuid, text, uuid, text, text, text, uuid)
  set plan_cache_mode = force_generic_plan;
alter function handoff.chat_route(uuid, uuid) set plan_cache_mode = force_generic_plan;
alter function handoff.active_checkpoint(uuid, text, text)
  set plan_cache_mode = force_generic_plan;
alter function handoff.promote_waiting_turn() set plan_cache_mode = force_generic_plan;

-- A reply's usage so far (infra/store/usage.py `record`): its row is the user's whose turn the
-- reply answers; a reply deleted while its turn ran is counted all the same; a figure never
-- goes down.
create or replace function handoff.record_usage(
  p_message_id uuid, p_model text, p_input bigint, p_output bigint, p_tool_calls integer
) returns void
language plpgsql set search_path = '' set plan_cache_mode = force_generic_plan as $$
begin
  insert into public.reply_usage as u
    (message_id, user_id, chat_id, model, input_tokens, output_tokens, tool_calls)
  select r.id, r.user_id, r.chat_id, p_model, p_input, p_output, p_tool_calls
  from (
    -- The sender of the turn: its job's (a regenerated reply's is whoever asked again), else
    -- the sender of the message it answers, else the chat's owner (rows from before senders).
    select m.id, coalesce(
             (select j.sender_id from public.job_runs j where j.root_message_id = m.id
              order by j.created_at desc limit 1),
             p.sender_id, c.user_id) as user_id,
           m.chat_id
    from public.message m join public.chat c on c.id = m.chat_id
    left join public.message p on p.id = m.parent_message_id
    where m.id = p_message_id
    union all
    -- A reply deleted while its turn ran (infra/store/erased_turns.py): spent all the same.
    select e.reply_id, e.user_id, e.chat_id from handoff.erased_turn e
    where e.reply_id = p_message_id
    limit 1
  ) r
  on conflict (message_id) do update
  set model = coalesce(excluded.model, u.model),
      input_tokens = greatest(u.input_tokens, excluded.input_tokens),
      output_tokens = greatest(u.output_tokens, excluded.output_tokens),
      tool_calls = greatest(u.tool_calls, excluded.tool_calls),
      updated_at = now();
end
$$;

-- A reply's sources (infra/store/sources.py `record`): the message that started it, then what
-- it heard, in order; only messages of its chat.
create or replace function handoff.record_sources(
  p_reply_id uuid, p_chat_id uuid, p_ids uuid[]
) returns void
language plpgsql set search_path = '' set plan_cache_mode = force_generic_plan as $$
begin
  insert into public.reply_source (reply_id, message_id, chat_id, kind, position)
  select p_reply_id, s.id, p_chat_id, case when s.pos = 1 then 'started' else 'context' end,
    s.pos - 1
  from unnest(p_ids) with ordinality as s(id, pos)
  join public.message m on m.id = s.id and m.chat_id = p_chat_id
  on conflict do nothing;
end
$$;

revoke all on function handoff.record_usage(uuid, text, bigint, bigint, integer),
  handoff.record_sources(uuid, uuid, uuid[])
  from public, anon, authenticated;
