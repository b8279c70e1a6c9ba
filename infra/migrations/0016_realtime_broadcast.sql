-- Drafts over Broadcast (DRAFT_TRANSPORT=broadcast, infra/store/drafts.py): each draft write sends
-- what it added with realtime.send() on the chat's private channel, `chat:<chat id>`, which
-- Realtime authorizes by the RLS policies on realtime.messages.

-- The latest draft of a reply whose drafts go out over Broadcast, for what reads message_draft
-- under DRAFT_TRANSPORT=table: the history (a page loaded mid-stream), a cancel and a quick path
-- that died keep the text the user saw, and its seq and length keep a draft from going backwards.
-- Unlogged: subscribers get the drafts from realtime.messages, so this row needs no WAL. A server
-- crash empties it; the reply then shows the text of `message` until its next draft.
create unlogged table if not exists public.broadcast_draft (
  message_id uuid primary key references public.message (id) on delete cascade,
  chat_id uuid not null references public.chat (id) on delete cascade,
  draft_content text not null default '',
  seq bigint not null default 0,
  updated_at timestamptz not null default now()
);
alter table public.broadcast_draft enable row level security;
grant select on public.broadcast_draft to authenticated;
grant all on public.broadcast_draft to service_role;

-- Supabase's Realtime schema, where it is absent (plain Postgres: development, tests). On a real
-- project Realtime owns these (realtime.messages is partitioned by day there, and Realtime makes
-- the publication it reads it through), so nothing here replaces what exists.
do $$
begin
  if not exists (select from pg_namespace where nspname = 'realtime') then
    create schema realtime;
    grant usage on schema realtime to anon, authenticated, service_role;
  end if;
  if to_regclass('realtime.messages') is null then
    -- Supabase's columns and indexes (one unpartitioned table instead of daily partitions), so
    -- a broadcast writes the WAL it writes there.
    create table realtime.messages (
      topic text not null,
      extension text not null,
      payload jsonb,
      event text,
      private boolean default false,
      updated_at timestamp not null default now(),
      inserted_at timestamp not null default now(),
      id uuid not null default gen_random_uuid(),
      primary key (id, inserted_at)
    );
    create index messages_inserted_at_topic_index on realtime.messages (inserted_at desc, topic)
      where extension = 'broadcast' and private is true;
    alter table realtime.messages enable row level security;
    grant select, insert, update on realtime.messages to anon, authenticated, service_role;
    if not exists (
      select from pg_publication where pubname = 'supabase_realtime_messages_publication'
    ) then
      create publication supabase_realtime_messages_publication for table realtime.messages;
    end if;
  end if;
  if to_regprocedure('realtime.topic()') is null then
    -- The topic a policy on realtime.messages is asked about.
    create function realtime.topic() returns text language sql stable as $f$
      select nullif(current_setting('realtime.topic', true), '')::text
    $f$;
    grant execute on function realtime.topic() to anon, authenticated, service_role;
  end if;
  if to_regprocedure('realtime.send(jsonb, text, text, boolean)') is null then
    -- Supabase's realtime.send: a row of realtime.messages, which Realtime broadcasts once its
    -- transaction commits. Like Supabase's, a failure is a warning, not the caller's error. The
    -- notification wakes the development server's change feed (devkit/change_feed.py) at once,
    -- as Realtime's replication stream would; it writes no WAL.
    create function realtime.send(
      payload jsonb, event text, topic text, private boolean default true
    ) returns void language plpgsql as $f$
    declare
      generated_id uuid;
      final_payload jsonb;
    begin
      begin
        generated_id := gen_random_uuid();
        if payload ? 'id' then
          final_payload := payload;
        else
          final_payload := jsonb_set(payload, '{id}', to_jsonb(generated_id));
        end if;
        execute format('set local realtime.topic to %L', topic);
        insert into realtime.messages (id, payload, event, topic, private, extension)
        values (generated_id, final_payload, event, topic, private, 'broadcast');
        perform pg_notify('realtime_messages', topic);
      exception
        when others then
          raise warning 'WarnSendingBroadcastMessage: %', sqlerrm;
      end;
    end
    $f$;
  end if;
end
$$;

do $$
begin
  if not exists (
    select from pg_policies where schemaname = 'public' and tablename = 'broadcast_draft'
      and policyname = 'owner reads broadcast drafts'
  ) then
    create policy "owner reads broadcast drafts" on public.broadcast_draft for select
      to authenticated
      using (exists (
        select 1 from public.chat c
        where c.id = broadcast_draft.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
  -- A chat's owner may join its private channel and receive what is broadcast there; nobody may
  -- send on it (no insert policy): its broadcasts come from the database.
  if not exists (
    select from pg_policies where schemaname = 'realtime' and tablename = 'messages'
      and policyname = 'chat owner receives its broadcasts'
  ) then
    create policy "chat owner receives its broadcasts" on realtime.messages for select
      to authenticated
      using (
        realtime.messages.extension = 'broadcast'
        and exists (
          select 1 from public.chat c
          where c.user_id = (select auth.uid()) and 'chat:' || c.id::text = (select realtime.topic())
        )
      );
  end if;
end
$$;
