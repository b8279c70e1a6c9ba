-- The head a new message's turn continues, in one statement (infra/store/heads.py): the active
-- branch of the chat's thread for the assistant (public.active_branch; none stored: `main`),
-- that branch's head checkpoint (public.branch; none recorded: the thread's latest), and that
-- checkpoint as LangGraph's Postgres saver reads it, with its blobs and pending writes in the
-- saver's own columns. Two round trips before (the branch, then the checkpoint), each planned
-- anew (no prepared statements behind a transaction pooler); as one query, its planning took
-- longer than both. A plpgsql function keeps its statements' plans for the session.
--
-- The caller's own rights (the app's role reads these tables already); no one else may call it.
create or replace function handoff.active_checkpoint(
  p_chat_id uuid, p_assistant_id text, p_thread_id text
) returns table (
  branch text, head text, thread_id text, checkpoint jsonb, checkpoint_ns text,
  checkpoint_id text, parent_checkpoint_id text, metadata jsonb, channel_values bytea[],
  pending_writes bytea[]
)
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_branch text;
  v_head text;
  v_id text;
begin
  select a.branch_id into v_branch from public.active_branch a
  where a.chat_id = p_chat_id and a.assistant_id = p_assistant_id;
  v_branch := coalesce(v_branch, 'main');
  select b.head_checkpoint_id into v_head from public.branch b
  where b.chat_id = p_chat_id and b.assistant_id = p_assistant_id and b.id = v_branch;
  v_id := v_head;
  if v_id is null then
    select max(c.checkpoint_id) into v_id from langgraph.checkpoints c
    where c.thread_id = p_thread_id and c.checkpoint_ns = '';
  end if;
  -- The columns of the saver's own read (SELECT_SQL in langgraph.checkpoint.postgres.base).
  return query
  select v_branch, v_head, c.thread_id, c.checkpoint, c.checkpoint_ns, c.checkpoint_id,
    c.parent_checkpoint_id, c.metadata,
    (select array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])
     from jsonb_each_text(c.checkpoint -> 'channel_versions') v
     join langgraph.checkpoint_blobs bl
       on bl.thread_id = c.thread_id and bl.checkpoint_ns = c.checkpoint_ns
      and bl.channel = v.key and bl.version = v.value),
    (select array_agg(array[w.task_id::text::bytea, w.channel::bytea, w.type::bytea, w.blob,
       convert_to(w.task_path, 'UTF8'), w.idx::text::bytea])
     from langgraph.checkpoint_writes w
     where w.thread_id = c.thread_id and w.checkpoint_ns = c.checkpoint_ns
       and w.checkpoint_id = c.checkpoint_id)
  from langgraph.checkpoints c
  where c.thread_id = p_thread_id and c.checkpoint_ns = '' and c.checkpoint_id = v_id;
  if not found then
    return query select v_branch, v_head, null::text, null::jsonb, null::text, null::text,
      null::text, null::jsonb, null::bytea[], null::bytea[];
  end if;
end
$$;

revoke all on function handoff.active_checkpoint(uuid, text, text)
  from public, anon, authenticated;
