-- Retention (infra/store/retention.py): a thread's checkpoints that nothing can still need go,
-- at most p_limit of them per call (null: all), oldest first. Kept: each branch head, the
-- thread's latest checkpoint, every checkpoint a message names (`metadata.checkpointId`: where
-- a user message's turn began, where a reply's ended), and every checkpoint made since
-- p_before; a thread with an unfinished job (a turn running, waiting, queued, or paused on an
-- approval, a question or a pause) is left whole. What goes is the checkpoints between those:
-- a turn's handoff point and its rounds. A kept checkpoint whose parent went names its nearest
-- kept ancestor instead, so a branch cut by an erasure still goes back to a checkpoint that is
-- there. The blobs of the checkpoints that went go unless a kept checkpoint reads from them,
-- through any delta (list channels are stored as deltas on their base: migration 0020), and
-- so do their pending writes. Tool results older than p_before whose output is not in S3 go
-- too: no run of an ended job reuses them, and an output in S3 stays as long as the message
-- that names its address.
create or replace function handoff.prune_thread(
  p_thread text, p_before timestamptz, p_limit integer
) returns table (checkpoints bigint, blobs bigint, writes bigint, tool_results bigint)
language plpgsql security definer set search_path = '' as $$
declare
  chat uuid;
  assistant text;
  doomed text[];
  n_checkpoints bigint := 0;
  n_blobs bigint := 0;
  n_writes bigint := 0;
  n_results bigint := 0;
begin
  if p_thread !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:.' then
    return query select 0::bigint, 0::bigint, 0::bigint, 0::bigint;
    return;
  end if;
  chat := split_part(p_thread, ':', 1)::uuid;
  assistant := substr(p_thread, 38);
  if exists (
    select 1 from public.job_runs j
    where j.chat_id = chat and j.assistant_id = assistant
      and j.status = any (handoff.unfinished_statuses())
  ) then
    return query select 0::bigint, 0::bigint, 0::bigint, 0::bigint;
    return;
  end if;
  select coalesce(array_agg(d.checkpoint_id), '{}') into doomed from (
    select c.checkpoint_id from langgraph.checkpoints c
    where c.thread_id = p_thread and c.checkpoint_ns = ''
      and (c.checkpoint ->> 'ts')::timestamptz < p_before
      and c.checkpoint_id < (
        select max(l.checkpoint_id) from langgraph.checkpoints l
        where l.thread_id = p_thread and l.checkpoint_ns = '')
      and not exists (
        select 1 from public.branch b
        where b.chat_id = chat and b.assistant_id = assistant
          and b.head_checkpoint_id = c.checkpoint_id)
      and not exists (
        select 1 from public.message m
        where m.chat_id = chat and m.assistant_id = assistant
          and m.metadata ->> 'checkpointId' = c.checkpoint_id)
    order by c.checkpoint_id
    limit p_limit
  ) d;

  if cardinality(doomed) > 0 then
    with recursive up (checkpoint_id, at) as (
      select c.checkpoint_id, c.parent_checkpoint_id from langgraph.checkpoints c
      where c.thread_id = p_thread and c.checkpoint_ns = ''
        and c.parent_checkpoint_id = any (doomed) and not c.checkpoint_id = any (doomed)
      union all
      select up.checkpoint_id, p.parent_checkpoint_id
      from up join langgraph.checkpoints p
        on p.thread_id = p_thread and p.checkpoint_ns = '' and p.checkpoint_id = up.at
      where up.at = any (doomed)
    )
    update langgraph.checkpoints c set parent_checkpoint_id = up.at
    from up
    where c.thread_id = p_thread and c.checkpoint_ns = '' and c.checkpoint_id = up.checkpoint_id
      and (up.at is null or not up.at = any (doomed));

    with recursive used (channel, version, type) as (
      select b.channel, b.version, b.type
      from langgraph.checkpoints c join langgraph.checkpoint_blobs b
        on b.thread_id = c.thread_id and b.checkpoint_ns = c.checkpoint_ns
       and c.checkpoint -> 'channel_versions' ->> b.channel = b.version
      where c.thread_id = p_thread and c.checkpoint_ns = '' and not c.checkpoint_id = any (doomed)
      union
      select b.channel, b.version, b.type
      from used u join langgraph.checkpoint_blobs b
        on b.thread_id = p_thread and b.checkpoint_ns = '' and b.channel = u.channel
       and b.version = split_part(u.type, ':', 3)
      where u.type like 'delta:%'
    ), theirs as (
      select distinct v.key as channel, v.value as version
      from langgraph.checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
      where c.thread_id = p_thread and c.checkpoint_ns = '' and c.checkpoint_id = any (doomed)
    )
    delete from langgraph.checkpoint_blobs b
    using theirs t
    where b.thread_id = p_thread and b.checkpoint_ns = ''
      and b.channel = t.channel and b.version = t.version
      and not exists (
        select 1 from used u where u.channel = b.channel and u.version = b.version);
    get diagnostics n_blobs = row_count;

    delete from langgraph.checkpoint_writes
    where thread_id = p_thread and checkpoint_ns = '' and checkpoint_id = any (doomed);
    get diagnostics n_writes = row_count;
    delete from langgraph.checkpoints
    where thread_id = p_thread and checkpoint_ns = '' and checkpoint_id = any (doomed);
    get diagnostics n_checkpoints = row_count;
  end if;

  delete from handoff.tool_results r
  where (r.thread_id, r.tool_call_id) in (
    select o.thread_id, o.tool_call_id from handoff.tool_results o
    where o.thread_id = p_thread and o.created_at < p_before and o.artifact ->> 'uri' is null
    limit p_limit);
  get diagnostics n_results = row_count;
  return query select n_checkpoints, n_blobs, n_writes, n_results;
end
$$;

revoke all on function handoff.prune_thread(text, timestamptz, integer) from public;
