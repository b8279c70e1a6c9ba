-- Chats, messages, drafts and background jobs. Every table has RLS on: Supabase grants the Data
-- API roles default privileges on public tables, so a table without RLS would be readable by all.

create table if not exists public.chat (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  title text not null default '',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists chat_user_id_idx on public.chat (user_id);

create table if not exists public.message (
  id uuid primary key default gen_random_uuid(),
  chat_id uuid not null references public.chat (id) on delete cascade,
  assistant_id text not null default 'default',
  role text not null check (role in ('user', 'assistant', 'tool', 'system')),
  content text not null default '',
  status text not null default 'completed'
    check (status in ('queued', 'streaming', 'completed', 'error', 'canceled')),
  parent_message_id uuid references public.message (id) on delete set null,
  metadata jsonb not null default '{}'::jsonb,
  handoff_event_id text unique,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists message_chat_created_idx on public.message (chat_id, created_at);
create index if not exists message_active_idx on public.message (status)
  where status in ('queued', 'streaming');

-- Whole-draft snapshots of an assistant message while it streams in the background. `seq` only
-- grows, so a late write from an older attempt can never replace a newer draft.
create table if not exists public.message_draft (
  message_id uuid primary key references public.message (id) on delete cascade,
  chat_id uuid not null references public.chat (id) on delete cascade,
  draft_content text not null default '',
  seq bigint not null default 0,
  updated_at timestamptz not null default now()
);

create table if not exists public.job_runs (
  id uuid primary key default gen_random_uuid(),
  chat_id uuid not null references public.chat (id) on delete cascade,
  assistant_id text not null default 'default',
  root_message_id uuid not null references public.message (id) on delete cascade,
  status text not null default 'queued'
    check (status in ('queued', 'processing', 'completed', 'error', 'canceled')),
  event_name text not null,
  idempotency_key text not null unique,
  -- The Inngest run that holds the claim: its own retries may re-claim, other runs may not.
  run_id text,
  attempt integer not null default 0,
  error text,
  payload jsonb not null,
  metadata jsonb not null default '{}'::jsonb,
  event_sent_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
-- One active background job per chat and assistant: the database settles races between requests.
create unique index if not exists job_runs_one_active_idx on public.job_runs (chat_id, assistant_id)
  where status in ('queued', 'processing');
create index if not exists job_runs_unsent_idx on public.job_runs (created_at)
  where event_sent_at is null;

alter table public.chat enable row level security;
alter table public.message enable row level security;
alter table public.message_draft enable row level security;
alter table public.job_runs enable row level security;

grant usage on schema public to anon, authenticated, service_role;
grant select, insert, update, delete on public.chat, public.message to authenticated;
grant select on public.message_draft, public.job_runs to authenticated;
grant all on public.chat, public.message, public.message_draft, public.job_runs to service_role;

do $$
begin
  if not exists (select from pg_policies where policyname = 'owner manages chats') then
    create policy "owner manages chats" on public.chat for all to authenticated
      using ((select auth.uid()) = user_id)
      with check ((select auth.uid()) = user_id);
  end if;
  if not exists (select from pg_policies where policyname = 'owner manages messages') then
    create policy "owner manages messages" on public.message for all to authenticated
      using (exists (
        select 1 from public.chat c where c.id = message.chat_id and c.user_id = (select auth.uid())
      ))
      with check (exists (
        select 1 from public.chat c where c.id = message.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
  if not exists (select from pg_policies where policyname = 'owner reads drafts') then
    create policy "owner reads drafts" on public.message_draft for select to authenticated
      using (exists (
        select 1 from public.chat c
        where c.id = message_draft.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
  if not exists (select from pg_policies where policyname = 'owner reads jobs') then
    create policy "owner reads jobs" on public.job_runs for select to authenticated
      using (exists (
        select 1 from public.chat c where c.id = job_runs.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
  if not exists (
    select from pg_publication_tables
    where pubname = 'supabase_realtime' and schemaname = 'public' and tablename = 'message'
  ) then
    alter publication supabase_realtime add table public.message;
  end if;
  if not exists (
    select from pg_publication_tables
    where pubname = 'supabase_realtime' and schemaname = 'public' and tablename = 'message_draft'
  ) then
    alter publication supabase_realtime add table public.message_draft;
  end if;
end
$$;
