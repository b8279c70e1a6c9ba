-- What each reply's turn used (infra/store/usage.py): its model, its tokens and its tool calls,
-- the figures of the reply's `metadata.usage` and `metadata.snapshot.progress`, written by the
-- service in the transaction that stores them on the reply. GET /api/usage, the daily token
-- budget (MAX_USER_DAILY_TOKENS) and `handoff usage` read this table, not the messages: a user
-- may edit and delete their own messages and chats through the Data API, and that must neither
-- change what they spent nor make room in their budget. So a row has no foreign key to its
-- message or chat, and its owner may read it but not write it.
create table if not exists public.reply_usage (
  message_id uuid primary key,  -- the reply
  user_id uuid not null references auth.users (id) on delete cascade,
  chat_id uuid not null,
  model text,  -- the reply's `metadata.model`; null when unknown
  input_tokens bigint not null default 0,
  output_tokens bigint not null default 0,
  tool_calls integer not null default 0,  -- the calls that were answered
  -- When the reply first recorded usage, in its turn's first model round: the day it counts for.
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
-- The budget sums a user's tokens since midnight on every turn they start: an index-only range.
create index if not exists reply_usage_user_created_idx on public.reply_usage (user_id, created_at)
  include (input_tokens, output_tokens);
create index if not exists reply_usage_chat_created_idx on public.reply_usage (chat_id, created_at);

alter table public.reply_usage enable row level security;
-- Supabase's default privileges give the Data API roles everything on a new public table.
revoke all on public.reply_usage from anon, authenticated;
grant select on public.reply_usage to authenticated;
grant all on public.reply_usage to service_role;

do $$
begin
  if not exists (select from pg_policies where policyname = 'owner reads usage') then
    create policy "owner reads usage" on public.reply_usage for select to authenticated
      using ((select auth.uid()) = user_id);
  end if;
end
$$;

-- The replies stored before this table.
insert into public.reply_usage
  (message_id, user_id, chat_id, model, input_tokens, output_tokens, tool_calls, created_at)
select m.id, c.user_id, m.chat_id, m.metadata ->> 'model',
       coalesce((m.metadata -> 'usage' ->> 'input')::bigint, 0),
       coalesce((m.metadata -> 'usage' ->> 'output')::bigint, 0),
       (select count(*) from jsonb_array_elements(
          case jsonb_typeof(m.metadata -> 'snapshot' -> 'progress')
            when 'array' then m.metadata -> 'snapshot' -> 'progress' else '[]'::jsonb end) p
        where p ->> 'status' <> 'pending'),
       m.created_at
from public.message m join public.chat c on c.id = m.chat_id
where m.role = 'assistant' and jsonb_typeof(m.metadata -> 'usage') = 'object'
on conflict (message_id) do nothing;
