-- What the Data API roles may do with our objects, stated whole, whatever the database granted
-- them by default. On Supabase, `public` has default privileges that give anon and
-- authenticated every privilege on each new table, sequence and function there (and Postgres
-- gives EXECUTE on every new function to PUBLIC): TRUNCATE among them, which row-level security
-- does not filter, so any signed-in user could empty every user's chats. Each of our objects
-- is named here, not "all tables in schema public": a project may keep tables of its own there.
-- tests/security/test_privileges.py migrates a database with Supabase's defaults and checks
-- every object against an explicit list.

revoke all on public.chat, public.message, public.message_draft, public.broadcast_draft,
  public.job_runs, public.branch, public.active_branch, public.reply_usage
  from public, anon, authenticated;
-- Chats are created through POST /api/chats only, which counts them against
-- MAX_CHATS_PER_MINUTE under the user's lock (infra/store/limits.py): an insert through the
-- Data API would escape the limit.
grant select, update, delete on public.chat to authenticated;
grant select, insert, update, delete on public.message to authenticated;
grant select on public.message_draft, public.broadcast_draft, public.job_runs, public.branch,
  public.reply_usage to authenticated;
-- Choosing the active branch; deleting the row (a switch to `main`) is not offered.
grant select, insert, update on public.active_branch to authenticated;

-- The status sets the database's own rules ask about, as infra/store/statuses.py defines them
-- (tests/infra/test_statuses.py checks that they agree). Immutable, so the planner folds them
-- into constants. Their bodies name nothing: a policy runs them as the user, who may not look
-- names up in `handoff`.
create or replace function handoff.slot_statuses() returns text[]
language sql immutable parallel safe as $$
  select array['queued', 'processing', 'paused']
$$;
create or replace function handoff.unfinished_statuses() returns text[]
language sql immutable parallel safe as $$
  select array['waiting', 'queued', 'processing', 'paused']
$$;
revoke all on function handoff.slot_statuses(), handoff.unfinished_statuses() from public;
-- The policy below runs as the user; without USAGE on `handoff` they cannot call it themselves.
grant execute on function handoff.slot_statuses(), handoff.unfinished_statuses()
  to authenticated;
revoke all on function handoff.promote_waiting_turn() from public;

create or replace function handoff.promote_waiting_turn() returns trigger
language plpgsql as $$
begin
  if exists (
    select 1 from public.job_runs
    where chat_id = new.chat_id and assistant_id = new.assistant_id
      and status = any (handoff.slot_statuses())
  ) then
    return null;
  end if;
  begin
    update public.job_runs set status = 'queued', updated_at = now()
    where id = (
      select id from public.job_runs
      where chat_id = new.chat_id and assistant_id = new.assistant_id and status = 'waiting'
      order by created_at
      limit 1
    );
  exception when unique_violation then
    null;  -- a concurrent transaction took the slot first; this turn waits for that one
  end;
  return null;
end
$$;

-- The API refuses a branch switch while a turn of the chat has not ended (409): the turn's
-- messages land on the branch it began on. The same rule for writes through the Data API.
drop policy if exists "no switch while a turn runs" on public.active_branch;
create policy "no switch while a turn runs" on public.active_branch as restrictive
  for insert to authenticated
  with check (not exists (
    select 1 from public.job_runs j
    where j.chat_id = active_branch.chat_id and j.assistant_id = active_branch.assistant_id
      and j.status = any (handoff.unfinished_statuses())
  ));
drop policy if exists "no switch while a turn runs (update)" on public.active_branch;
create policy "no switch while a turn runs (update)" on public.active_branch as restrictive
  for update to authenticated
  using (not exists (
    select 1 from public.job_runs j
    where j.chat_id = active_branch.chat_id and j.assistant_id = active_branch.assistant_id
      and j.status = any (handoff.unfinished_statuses())
  ))
  with check (not exists (
    select 1 from public.job_runs j
    where j.chat_id = active_branch.chat_id and j.assistant_id = active_branch.assistant_id
      and j.status = any (handoff.unfinished_statuses())
  ));

-- A private channel's rows are its owner's: the row's own topic must be the chat's, not only
-- the topic the session asks about (realtime.topic(), which a session sets for itself), or a
-- user who sets their own chat's topic reads every chat's broadcasts.
drop policy if exists "chat owner receives its broadcasts" on realtime.messages;
create policy "chat owner receives its broadcasts" on realtime.messages for select
  to authenticated
  using (
    realtime.messages.extension = 'broadcast'
    and realtime.messages.topic = (select realtime.topic())
    and exists (
      select 1 from public.chat c
      where c.user_id = (select auth.uid()) and 'chat:' || c.id::text = realtime.messages.topic
    )
  );

-- Only the service sends broadcasts (the draft writer). Where Realtime owns realtime.send (a
-- real project), its owner decides and this changes nothing; its insert is refused to the
-- Data API roles all the same, as realtime.messages has no insert policy.
do $$
begin
  if to_regprocedure('realtime.send(jsonb, text, text, boolean)') is not null then
    begin
      revoke all on function realtime.send(jsonb, text, text, boolean)
        from public, anon, authenticated;
      grant execute on function realtime.send(jsonb, text, text, boolean) to service_role;
    exception when insufficient_privilege then
      raise notice 'realtime.send is not ours to grant: left as Realtime set it';
    end;
  end if;
end
$$;
