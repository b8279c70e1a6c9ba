-- A thread's branches (infra/store/branches.py). Each edit or regenerated reply opens one, from
-- the message it replaces (`forked_from`; null for `main`); `head_checkpoint_id` is the newest
-- checkpoint a turn on it stored, where the next turn on it continues (null: the thread's
-- latest). One branch per chat and assistant is active: the history shows it and a new message
-- continues it. Users read both; they choose the active branch, the service writes the rest.
create table if not exists public.branch (
  chat_id uuid not null references public.chat (id) on delete cascade,
  assistant_id text not null default 'default',
  id text not null,
  forked_from uuid references public.message (id) on delete cascade,
  head_checkpoint_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (chat_id, assistant_id, id)
);

create table if not exists public.active_branch (
  chat_id uuid not null references public.chat (id) on delete cascade,
  assistant_id text not null default 'default',
  branch_id text not null,
  updated_at timestamptz not null default now(),
  primary key (chat_id, assistant_id),
  foreign key (chat_id, assistant_id, branch_id)
    references public.branch (chat_id, assistant_id, id) on delete cascade
);

alter table public.branch enable row level security;
alter table public.active_branch enable row level security;
grant select on public.branch to authenticated;
grant select, insert, update on public.active_branch to authenticated;
grant all on public.branch, public.active_branch to service_role;

do $$
begin
  if not exists (select from pg_policies where policyname = 'owner reads branches') then
    create policy "owner reads branches" on public.branch for select to authenticated
      using (exists (
        select 1 from public.chat c where c.id = branch.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
  if not exists (select from pg_policies where policyname = 'owner chooses the active branch') then
    create policy "owner chooses the active branch" on public.active_branch for all
      to authenticated
      using (exists (
        select 1 from public.chat c
        where c.id = active_branch.chat_id and c.user_id = (select auth.uid())
      ))
      with check (exists (
        select 1 from public.chat c
        where c.id = active_branch.chat_id and c.user_id = (select auth.uid())
      ));
  end if;
end
$$;

-- The branches that edits made before this table, from their messages' marks. The live one (that
-- of the newest message not marked stale) is active and continues from the thread's latest
-- checkpoint; an old one from where its latest reply ended.
insert into public.branch (chat_id, assistant_id, id, forked_from, head_checkpoint_id, created_at)
select m.chat_id, m.assistant_id, coalesce(m.metadata ->> 'branchId', 'main'),
  (array_agg((m.metadata ->> 'editOf')::uuid order by m.created_at)
    filter (where m.metadata ? 'editOf'))[1],
  (array_agg(m.metadata ->> 'checkpointId' order by m.created_at desc)
    filter (where m.role = 'assistant' and m.metadata ->> 'checkpointId' is not null))[1],
  min(m.created_at)
from public.message m
group by 1, 2, 3
on conflict do nothing;

insert into public.active_branch (chat_id, assistant_id, branch_id)
select distinct on (m.chat_id, m.assistant_id)
  m.chat_id, m.assistant_id, coalesce(m.metadata ->> 'branchId', 'main')
from public.message m
where not coalesce((m.metadata ->> 'stale')::boolean, false)
order by m.chat_id, m.assistant_id, m.created_at desc, m.role
on conflict do nothing;

update public.branch b set head_checkpoint_id = null
from public.active_branch a
where a.chat_id = b.chat_id and a.assistant_id = b.assistant_id and a.branch_id = b.id;
