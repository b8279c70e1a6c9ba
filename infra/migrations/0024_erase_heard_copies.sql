-- A message is heard by the chat's other assistants (turns/context.py): it joins each of their
-- threads under its row's id, and a message posted to a shared chat (`assistant_id` '') is in no
-- thread of its own, only in those. Deleting a message therefore also cuts every other thread of
-- the chat that holds it, at the checkpoints that hold it (by id, through any delta): their tool
-- results stay (p_since 'infinity'), as they belong to those threads' own turns.
create or replace function handoff.erase_message() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  turn_message uuid := case when old.role = 'user' then old.id else old.parent_message_id end;
  since timestamptz;
  other text;
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
  if old.assistant_id <> '' then
    perform handoff.cut_thread(
      old.chat_id, old.assistant_id, turn_message, coalesce(since, old.created_at));
  end if;
  for other in
    select assistant_id from public.message where chat_id = old.chat_id
    union select assistant_id from public.branch where chat_id = old.chat_id
    union select assistant_id from public.chat_assistant where chat_id = old.chat_id
  loop
    if other <> '' and other <> old.assistant_id then
      perform handoff.cut_thread(old.chat_id, other, old.id, 'infinity');
    end if;
  end loop;
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
revoke all on function handoff.erase_message() from public, anon, authenticated;
