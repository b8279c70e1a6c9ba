-- What a user deletes is gone (docs/reliability.md, "What is kept, and how it is erased").
-- Deleting a chat, a message or the user's `auth.users` row, through the Data API or in the
-- database itself, erases every copy the database keeps outside the deleted rows: the chat's
-- threads in `langgraph` (checkpoints, their blobs and writes), its tool results, its
-- broadcasts in realtime.messages, and the text that jobs carry. Triggers do it, as the table's owner (security definer), so
-- every way of deleting gets the same treatment: the user's own role cannot reach `langgraph`
-- or `handoff`. Objects in S3 cannot be deleted from SQL: their addresses wait in
-- handoff.erased_object for the background to delete them (infra/store/erasures.py).
--
-- A deleted job that was running is remembered in handoff.erased_turn until its run stops
-- (infra/store/erased_turns.py): the active-turn limit counts it, and what its model used is
-- recorded in reply_usage all the same. Deleting frees nothing a running turn holds.

create table if not exists handoff.erased_object (
  uri text primary key,
  queued_at timestamptz not null default now()
);

create table if not exists handoff.erased_turn (
  job_key text primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  chat_id uuid not null,
  assistant_id text not null,
  reply_id uuid,
  kind text not null,
  erased_at timestamptz not null default now()
);
create index if not exists erased_turn_user_idx on handoff.erased_turn (user_id);
create index if not exists erased_turn_reply_idx on handoff.erased_turn (reply_id);

-- A tool result's large output, once its row is gone, is an object to delete.
create or replace function handoff.queue_erased_object() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if old.artifact ->> 'uri' is not null then
    insert into handoff.erased_object (uri) values (old.artifact ->> 'uri')
    on conflict do nothing;
  end if;
  return null;
end
$$;
drop trigger if exists tool_results_erase_object on handoff.tool_results;
create trigger tool_results_erase_object after delete on handoff.tool_results
  for each row execute function handoff.queue_erased_object();

-- Realtime owns realtime.messages on a real project (it drops its daily partitions itself); a
-- database role that may not delete there leaves them to that.
create or replace function handoff.erase_broadcasts(p_topic text, p_message_id uuid)
returns void language plpgsql security definer set search_path = '' as $$
begin
  delete from realtime.messages
  where topic = p_topic
    and (p_message_id is null or payload ->> 'messageId' = p_message_id::text);
exception when insufficient_privilege or undefined_table then
  raise notice 'realtime.messages is not ours to delete from';
end
$$;

-- A whole thread: every checkpoint, blob and write, and the tool results of its calls.
create or replace function handoff.erase_thread(p_thread text)
returns void language plpgsql security definer set search_path = '' as $$
begin
  delete from langgraph.checkpoint_writes where thread_id = p_thread;
  delete from langgraph.checkpoint_blobs where thread_id = p_thread;
  delete from langgraph.checkpoints where thread_id = p_thread;
  delete from handoff.tool_results where thread_id = p_thread;
end
$$;

-- The thread cut at a message: every checkpoint that holds it (a blob or a pending write with
-- its id; every later checkpoint of a branch holds it too) goes, with its writes, the blobs no
-- checkpoint left uses, and the tool results stored since `p_since` (calls made after the
-- message). Without a message (a reply whose user's message is gone), every checkpoint made
-- since `p_since`. A branch whose head went continues from the newest checkpoint before the cut.
create or replace function handoff.cut_thread(
  p_chat_id uuid, p_assistant_id text, p_message_id uuid, p_since timestamptz
) returns void language plpgsql security definer set search_path = '' as $$
declare
  thread text := p_chat_id::text || ':' || p_assistant_id;
  needle bytea := convert_to(p_message_id::text, 'UTF8');
  cut text[];
begin
  select coalesce(array_agg(distinct h.checkpoint_id), '{}') into cut from (
    select c.checkpoint_id from langgraph.checkpoints c
    join langgraph.checkpoint_blobs b
      on b.thread_id = c.thread_id and b.checkpoint_ns = c.checkpoint_ns
     and c.checkpoint -> 'channel_versions' ->> b.channel = b.version
    where c.thread_id = thread and position(needle in b.blob) > 0
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
  delete from langgraph.checkpoint_blobs b
  where b.thread_id = thread and not exists (
    select 1 from langgraph.checkpoints c
    where c.thread_id = b.thread_id and c.checkpoint_ns = b.checkpoint_ns
      and c.checkpoint -> 'channel_versions' ->> b.channel = b.version
  );
  delete from handoff.tool_results where thread_id = thread and created_at >= p_since;
end
$$;

-- Before the chat's rows go (they name its assistants, so its threads): its threads, its
-- broadcasts, and the running jobs that go with it, remembered for the user's limits.
create or replace function handoff.erase_chat() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  assistant text;
begin
  insert into handoff.erased_turn (job_key, user_id, chat_id, assistant_id, reply_id, kind)
  select j.idempotency_key, old.user_id, j.chat_id, j.assistant_id, j.root_message_id, j.kind
  from public.job_runs j
  where j.chat_id = old.id and j.status = 'processing'
    and exists (select 1 from auth.users u where u.id = old.user_id)
  on conflict do nothing;
  for assistant in
    select assistant_id from public.message where chat_id = old.id
    union select assistant_id from public.job_runs where chat_id = old.id
    union select assistant_id from public.branch where chat_id = old.id
    union select assistant_id from public.chat_assistant where chat_id = old.id
    union select 'default'
  loop
    perform handoff.erase_thread(old.id::text || ':' || assistant);
  end loop;
  perform handoff.erase_broadcasts('chat:' || old.id::text, null);
  return old;
end
$$;
drop trigger if exists chat_erase on public.chat;
create trigger chat_erase before delete on public.chat
  for each row execute function handoff.erase_chat();

-- A message deleted on its own (not with its chat): its thread cut at its turn (a reply's text
-- is in the checkpoints of the turn its user's message began; once that message is gone, in
-- those made since the reply began), its broadcasts, and its text where jobs carry it.
create or replace function handoff.erase_message() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  turn_message uuid := case when old.role = 'user' then old.id else old.parent_message_id end;
  since timestamptz;
begin
  if not exists (select 1 from public.chat where id = old.chat_id) then
    return null;  -- the chat's own trigger erased all of it
  end if;
  if old.role <> 'user' then
    select created_at into since from public.message where id = turn_message;
  end if;
  if since is null and old.role <> 'user' then
    turn_message := null;
  end if;
  perform handoff.cut_thread(
    old.chat_id, old.assistant_id, turn_message, coalesce(since, old.created_at));
  perform handoff.erase_broadcasts('chat:' || old.chat_id::text, old.id);
  update public.job_runs
  set payload = payload - 'content',
      metadata = case when metadata ? 'steered' then jsonb_set(metadata, '{steered}', coalesce(
        (select jsonb_agg(s) from jsonb_array_elements(metadata -> 'steered') s
         where s ->> 'id' <> old.id::text), '[]'::jsonb)) else metadata end
  where chat_id = old.chat_id
    and (payload ->> 'userMessageId' = old.id::text
         or metadata -> 'steered' @> jsonb_build_array(jsonb_build_object('id', old.id::text)));
  return null;
end
$$;
drop trigger if exists message_erase on public.message;
create trigger message_erase after delete on public.message
  for each row execute function handoff.erase_message();

-- A running job deleted with its reply: remembered for the user's limits (a chat's, above).
create or replace function handoff.remember_erased_turn() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  insert into handoff.erased_turn (job_key, user_id, chat_id, assistant_id, reply_id, kind)
  select old.idempotency_key, c.user_id, old.chat_id, old.assistant_id, old.root_message_id,
         old.kind
  from public.chat c where c.id = old.chat_id
  on conflict do nothing;
  return old;
end
$$;
drop trigger if exists job_runs_remember_erased on public.job_runs;
create trigger job_runs_remember_erased before delete on public.job_runs
  for each row when (old.status = 'processing')
  execute function handoff.remember_erased_turn();

revoke all on function handoff.queue_erased_object(),
  handoff.erase_broadcasts(text, uuid), handoff.erase_thread(text),
  handoff.cut_thread(uuid, text, uuid, timestamptz), handoff.erase_chat(),
  handoff.erase_message(), handoff.remember_erased_turn()
  from public;
