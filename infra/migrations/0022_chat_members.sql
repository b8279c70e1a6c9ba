-- Shared chats: a chat has an owner (`chat.user_id`) and members (`chat_member`). Members read
-- everything of the chat and send to it; only the owner renames or deletes the chat and changes
-- who is in it (through the API: infra/store/members.py). Every message says who sent it
-- (`message.sender_id`), and every job whose turn it is (`job_runs.sender_id`): the per-user
-- limits, the daily token budget and the usage rows count the sender, not the chat's owner.
--
-- The Data API roles no longer insert or update messages: the service stores them, after
-- checking, as the service, that the sender may send to the chat (infra/store/admission.py). A
-- member writing through the Data API could otherwise rewrite another member's message. Users
-- keep SELECT (members) and DELETE (their own messages; the owner any of the chat's).

create table if not exists public.chat_member (
  chat_id uuid not null references public.chat (id) on delete cascade,
  user_id uuid not null references auth.users (id) on delete cascade,
  added_by uuid,
  created_at timestamptz not null default now(),
  primary key (chat_id, user_id)
);
create index if not exists chat_member_user_idx on public.chat_member (user_id);

alter table public.message add column if not exists sender_id uuid
  references auth.users (id) on delete cascade;
update public.message m set sender_id = c.user_id
from public.chat c
where c.id = m.chat_id and m.role = 'user' and m.sender_id is null;

-- Whose turn a job is. A member's account deleted while their job runs leaves the job to end.
alter table public.job_runs add column if not exists sender_id uuid
  references auth.users (id) on delete set null;
update public.job_runs j set sender_id = c.user_id
from public.chat c
where c.id = j.chat_id and j.sender_id is null;
-- A reply's usage row names its job's sender (infra/store/usage.py).
create index if not exists job_runs_root_message_idx on public.job_runs (root_message_id);
create index if not exists job_runs_sender_unfinished_idx on public.job_runs (sender_id)
  where status in ('waiting', 'queued', 'processing', 'paused');

-- A job written without its sender (rows written before this column) is its chat owner's.
create or replace function handoff.default_job_sender() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if new.sender_id is null then
    select c.user_id into new.sender_id from public.chat c where c.id = new.chat_id;
  end if;
  return new;
end
$$;
drop trigger if exists job_runs_default_sender on public.job_runs;
create trigger job_runs_default_sender before insert on public.job_runs
  for each row execute function handoff.default_job_sender();

-- Whether the signed-in user may read the chat: its owner or a member. As the table's owner
-- (security definer), so that the policies below do not recurse into chat_member's own.
create or replace function handoff.is_chat_member(p_chat uuid) returns boolean
language sql stable security definer set search_path = '' as $$
  select exists (
    select 1 from public.chat c where c.id = p_chat and c.user_id = (select auth.uid())
  ) or exists (
    select 1 from public.chat_member m where m.chat_id = p_chat and m.user_id = (select auth.uid())
  )
$$;
-- Whether the signed-in user owns the chat.
create or replace function handoff.is_chat_owner(p_chat uuid) returns boolean
language sql stable security definer set search_path = '' as $$
  select exists (
    select 1 from public.chat c where c.id = p_chat and c.user_id = (select auth.uid())
  )
$$;
revoke all on function handoff.is_chat_member(uuid), handoff.is_chat_owner(uuid),
  handoff.default_job_sender() from public, anon, authenticated;
-- The policies run as the user; without USAGE on `handoff` they cannot call these themselves.
grant execute on function handoff.is_chat_member(uuid), handoff.is_chat_owner(uuid)
  to authenticated;

alter table public.chat_member enable row level security;
revoke all on public.chat_member from public, anon, authenticated;
grant select on public.chat_member to authenticated;
grant all on public.chat_member to service_role;

-- Messages: the service writes them; users read (members) and delete (their own; the owner any).
revoke insert, update on public.message from authenticated;

drop policy if exists "members read the member list" on public.chat_member;
create policy "members read the member list" on public.chat_member for select to authenticated
  using (handoff.is_chat_member(chat_id));

drop policy if exists "owner manages chats" on public.chat;
drop policy if exists "members read chats" on public.chat;
create policy "members read chats" on public.chat for select to authenticated
  using ((select auth.uid()) = user_id or handoff.is_chat_member(id));
drop policy if exists "owner renames chats" on public.chat;
create policy "owner renames chats" on public.chat for update to authenticated
  using ((select auth.uid()) = user_id) with check ((select auth.uid()) = user_id);
drop policy if exists "owner deletes chats" on public.chat;
create policy "owner deletes chats" on public.chat for delete to authenticated
  using ((select auth.uid()) = user_id);

drop policy if exists "owner manages messages" on public.message;
drop policy if exists "members read messages" on public.message;
create policy "members read messages" on public.message for select to authenticated
  using (handoff.is_chat_member(chat_id));
drop policy if exists "senders and the owner delete messages" on public.message;
create policy "senders and the owner delete messages" on public.message for delete
  to authenticated
  using (
    (sender_id = (select auth.uid()) and handoff.is_chat_member(chat_id))
    or handoff.is_chat_owner(chat_id)
  );

drop policy if exists "owner reads drafts" on public.message_draft;
drop policy if exists "members read drafts" on public.message_draft;
create policy "members read drafts" on public.message_draft for select to authenticated
  using (handoff.is_chat_member(chat_id));

drop policy if exists "owner reads broadcast drafts" on public.broadcast_draft;
drop policy if exists "members read broadcast drafts" on public.broadcast_draft;
create policy "members read broadcast drafts" on public.broadcast_draft for select
  to authenticated using (handoff.is_chat_member(chat_id));

drop policy if exists "owner reads jobs" on public.job_runs;
drop policy if exists "members read jobs" on public.job_runs;
create policy "members read jobs" on public.job_runs for select to authenticated
  using (handoff.is_chat_member(chat_id));

drop policy if exists "owner reads branches" on public.branch;
drop policy if exists "members read branches" on public.branch;
create policy "members read branches" on public.branch for select to authenticated
  using (handoff.is_chat_member(chat_id));

-- Members choose the active branch too (0017's restrictive policies still refuse a switch
-- while a turn of the chat has not ended).
drop policy if exists "owner chooses the active branch" on public.active_branch;
drop policy if exists "members choose the active branch" on public.active_branch;
create policy "members choose the active branch" on public.active_branch for all
  to authenticated
  using (handoff.is_chat_member(chat_id)) with check (handoff.is_chat_member(chat_id));

drop policy if exists "owner reads chat assistants" on public.chat_assistant;
drop policy if exists "members read chat assistants" on public.chat_assistant;
create policy "members read chat assistants" on public.chat_assistant for select
  to authenticated using (handoff.is_chat_member(chat_id));

-- Usage rows are each sender's own: a member reads what their turns used, in any chat; the
-- owner does not read a member's ("owner reads usage", 0014, is by user_id and stays).

-- A private channel's broadcasts are its chat's members': 0017's rule on the row's own topic
-- stays, so a session that names one channel reads no other.
drop policy if exists "chat owner receives its broadcasts" on realtime.messages;
drop policy if exists "chat members receive its broadcasts" on realtime.messages;
create policy "chat members receive its broadcasts" on realtime.messages for select
  to authenticated
  using (
    realtime.messages.extension = 'broadcast'
    and realtime.messages.topic = (select realtime.topic())
    and case
      when realtime.messages.topic ~ '^chat:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        then handoff.is_chat_member(substr(realtime.messages.topic, 6)::uuid)
      else false
    end
  );

-- A running job deleted with its chat or its reply is remembered against its sender's limits.
create or replace function handoff.erase_chat() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  assistant text;
begin
  insert into handoff.erased_turn (job_key, user_id, chat_id, assistant_id, reply_id, kind)
  select j.idempotency_key, coalesce(j.sender_id, old.user_id), j.chat_id, j.assistant_id,
         j.root_message_id, j.kind
  from public.job_runs j
  where j.chat_id = old.id and j.status = 'processing'
    and exists (select 1 from auth.users u where u.id = coalesce(j.sender_id, old.user_id))
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

create or replace function handoff.remember_erased_turn() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  insert into handoff.erased_turn (job_key, user_id, chat_id, assistant_id, reply_id, kind)
  select old.idempotency_key, coalesce(old.sender_id, c.user_id), old.chat_id, old.assistant_id,
         old.root_message_id, old.kind
  from public.chat c
  where c.id = old.chat_id
    and exists (select 1 from auth.users u where u.id = coalesce(old.sender_id, c.user_id))
  on conflict do nothing;
  return old;
end
$$;
revoke all on function handoff.erase_chat(), handoff.remember_erased_turn() from public;
