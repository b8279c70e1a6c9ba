-- A deployment's assistants (agent/assistants.py), readable where the data is, and which of them
-- take part in each chat.
--
-- `assistant` is a catalogue of the code's assistants, kept in step by `handoff migrate` and
-- `handoff dev` (infra/store/assistants.py): each one the code defines, by its stable id; one
-- the code no longer defines keeps its row with `retired_at` set, since replies and threads
-- still name it. The routes check ids against the code, not this table.
create table if not exists public.assistant (
  id text primary key check (id ~ '^[A-Za-z0-9_-]{1,64}$'),
  name text not null,
  description text not null default '',
  retired_at timestamptz,
  updated_at timestamptz not null default now()
);

-- The assistants of a chat, and the one that answers a message that names none. A chat without
-- rows has the deployment's default assistant only (chats from before this table, chats seeded
-- by `handoff dev`): the first change to its assistants writes that one down first.
create table if not exists public.chat_assistant (
  chat_id uuid not null references public.chat (id) on delete cascade,
  assistant_id text not null check (assistant_id ~ '^[A-Za-z0-9_-]{1,64}$'),
  is_default boolean not null default false,
  added_at timestamptz not null default clock_timestamp(),
  primary key (chat_id, assistant_id)
);
create unique index if not exists chat_assistant_one_default_idx
  on public.chat_assistant (chat_id) where is_default;

alter table public.assistant enable row level security;
alter table public.chat_assistant enable row level security;

-- Users read both; only the service writes, through the routes that check the chat's owner,
-- the assistant and that a chat keeps a default.
revoke all on public.assistant, public.chat_assistant from public, anon, authenticated;
grant select on public.assistant, public.chat_assistant to authenticated;
grant all on public.assistant, public.chat_assistant to service_role;

do $$
begin
  if not exists (select from pg_policies where policyname = 'signed-in users read assistants') then
    create policy "signed-in users read assistants" on public.assistant for select
      to authenticated using (true);
  end if;
  if not exists (select from pg_policies where policyname = 'owner reads chat assistants') then
    create policy "owner reads chat assistants" on public.chat_assistant for select
      to authenticated
      using (exists (
        select 1 from public.chat c
        where c.id = chat_assistant.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
end
$$;
