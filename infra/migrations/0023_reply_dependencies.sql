-- What each reply depends on, and the cascades that regenerate the replies an edit outdated.
--
-- `reply_source` holds, for every reply whose turn opened, the user message that started it
-- (`started`) and each public message it was given as context (`context`, in the order it was
-- given: `position`), written by the service in the transaction that stores the turn's first
-- checkpoints. The replies that depend on a message are one lookup by `message_id`.
create table if not exists public.reply_source (
  reply_id uuid not null references public.message (id) on delete cascade,
  message_id uuid not null references public.message (id) on delete cascade,
  chat_id uuid not null references public.chat (id) on delete cascade,
  kind text not null check (kind in ('started', 'context')),
  position integer not null default 0,
  primary key (reply_id, message_id)
);
create index if not exists reply_source_message_idx on public.reply_source (message_id);

-- A cascade: the regeneration of the replies that depend on an edited message, run by the
-- `cascade-regeneration` function. `status` says where it stands; `awaiting_approval` is the
-- card the editor answers (`remaining` replies still depend on the edit), `decision` their
-- answer. Only the service writes; the editor decides through the API.
create table if not exists public.cascade (
  id uuid primary key,
  chat_id uuid not null references public.chat (id) on delete cascade,
  user_id uuid not null,
  edited_message_id uuid not null,
  replacement_id uuid not null,
  status text not null default 'running' check (status in
    ('running', 'awaiting_approval', 'completed', 'declined', 'canceled', 'superseded')),
  decision text check (decision in ('approved', 'declined')),
  regenerated integer not null default 0,
  remaining integer not null default 0,
  event_sent_at timestamptz,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default now()
);
create index if not exists cascade_chat_idx on public.cascade (chat_id, created_at);

alter table public.reply_source enable row level security;
alter table public.cascade enable row level security;

-- The chat's members read both; only the service writes.
revoke all on public.reply_source, public.cascade from public, anon, authenticated;
grant select on public.reply_source, public.cascade to authenticated;
grant all on public.reply_source, public.cascade to service_role;

-- Members of the chat read them (migration 0022's handoff.is_chat_member).
drop policy if exists "members read reply sources" on public.reply_source;
create policy "members read reply sources" on public.reply_source for select to authenticated
  using (handoff.is_chat_member(chat_id));
drop policy if exists "members read cascades" on public.cascade;
create policy "members read cascades" on public.cascade for select to authenticated
  using (handoff.is_chat_member(chat_id));
