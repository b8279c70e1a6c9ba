-- Checkpoints store list channels as deltas (infra/store/checkpoints.py): a blob whose type is
-- `delta:<kept>:<base version>` holds what the channel added to its value at the base version,
-- so a message is in the blob that added it alone, and every later version builds on that
-- blob. Cutting a thread at a message follows those chains: a checkpoint holds the message when
-- a blob its values are read from does, through any delta; a blob goes once no checkpoint left
-- reads from it.
create or replace function handoff.cut_thread(
  p_chat_id uuid, p_assistant_id text, p_message_id uuid, p_since timestamptz
) returns void language plpgsql security definer set search_path = '' as $$
declare
  thread text := p_chat_id::text || ':' || p_assistant_id;
  needle bytea := convert_to(p_message_id::text, 'UTF8');
  cut text[];
begin
  select coalesce(array_agg(distinct h.checkpoint_id), '{}') into cut from (
    with recursive holding (checkpoint_ns, channel, version) as (
      select b.checkpoint_ns, b.channel, b.version from langgraph.checkpoint_blobs b
      where b.thread_id = thread and position(needle in b.blob) > 0
      union
      select b.checkpoint_ns, b.channel, b.version
      from holding h join langgraph.checkpoint_blobs b
        on b.thread_id = thread and b.checkpoint_ns = h.checkpoint_ns and b.channel = h.channel
       and b.type like 'delta:%' and split_part(b.type, ':', 3) = h.version
    )
    select c.checkpoint_id from langgraph.checkpoints c
    join holding h
      on h.checkpoint_ns = c.checkpoint_ns
     and c.checkpoint -> 'channel_versions' ->> h.channel = h.version
    where c.thread_id = thread
    union all
    select w.checkpoint_id from langgraph.checkpoint_writes w
    where w.thread_id = thread and position(needle in w.blob) > 0
    union all
    select c.checkpoint_id from langgraph.checkpoints c
    where c.thread_id = thread and position(p_message_id::text in c.checkpoint::text) > 0
    union all
    select c.checkpoint_id from langgraph.checkpoints c
    where c.thread_id = thread and p_message_id is null
      and (c.checkpoint ->> 'ts')::timestamptz >= p_since
  ) h;
  with recursive up as (
    select b.id as branch_id, c.parent_checkpoint_id as at
    from public.branch b join langgraph.checkpoints c
      on c.thread_id = thread and c.checkpoint_ns = '' and c.checkpoint_id = b.head_checkpoint_id
    where b.chat_id = p_chat_id and b.assistant_id = p_assistant_id
      and b.head_checkpoint_id = any (cut)
    union all
    select up.branch_id, c.parent_checkpoint_id
    from up join langgraph.checkpoints c
      on c.thread_id = thread and c.checkpoint_ns = '' and c.checkpoint_id = up.at
    where up.at = any (cut)
  )
  update public.branch b set head_checkpoint_id = up.at, updated_at = now()
  from up
  where b.chat_id = p_chat_id and b.assistant_id = p_assistant_id and b.id = up.branch_id
    and (up.at is null or not up.at = any (cut));
  delete from langgraph.checkpoint_writes
  where thread_id = thread and checkpoint_id = any (cut);
  delete from langgraph.checkpoints where thread_id = thread and checkpoint_id = any (cut);
  with recursive used (checkpoint_ns, channel, version, type) as (
    select b.checkpoint_ns, b.channel, b.version, b.type
    from langgraph.checkpoints c join langgraph.checkpoint_blobs b
      on b.thread_id = c.thread_id and b.checkpoint_ns = c.checkpoint_ns
     and c.checkpoint -> 'channel_versions' ->> b.channel = b.version
    where c.thread_id = thread
    union
    select b.checkpoint_ns, b.channel, b.version, b.type
    from used u join langgraph.checkpoint_blobs b
      on b.thread_id = thread and b.checkpoint_ns = u.checkpoint_ns and b.channel = u.channel
     and b.version = split_part(u.type, ':', 3)
    where u.type like 'delta:%'
  )
  delete from langgraph.checkpoint_blobs b
  where b.thread_id = thread and not exists (
    select 1 from used u
    where u.checkpoint_ns = b.checkpoint_ns and u.channel = b.channel and u.version = b.version
  );
  delete from handoff.tool_results where thread_id = thread and created_at >= p_since;
end
$$;

revoke all on function handoff.cut_thread(uuid, text, uuid, timestamptz) from public;
