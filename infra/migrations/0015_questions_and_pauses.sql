-- A reply whose background job asks the user a question (the `ask_user` tool) is
-- `awaiting_input`, with the question in metadata.pendingQuestion (infra/store/questions.py);
-- one whose job the user paused is `paused`, and so is its job (infra/store/pauses.py).
alter table public.message drop constraint if exists message_status_check;
alter table public.message add constraint message_status_check check (
  status in ('queued', 'streaming', 'awaiting_approval', 'awaiting_input', 'paused', 'completed',
             'error', 'canceled')
);
drop index if exists public.message_active_idx;
create index if not exists message_active_idx on public.message (status)
  where status in ('queued', 'streaming', 'awaiting_approval', 'awaiting_input', 'paused');

-- A paused job keeps its chat's slot: the slot index counts it, and its end promotes the turn
-- that waits behind it like any other job's.
alter table public.job_runs drop constraint if exists job_runs_status_check;
alter table public.job_runs add constraint job_runs_status_check check (
  status in ('waiting', 'queued', 'processing', 'paused', 'completed', 'error', 'canceled')
);
drop index if exists public.job_runs_one_active_idx;
create unique index if not exists job_runs_one_active_idx on public.job_runs (chat_id, assistant_id)
  where status in ('queued', 'processing', 'paused');
drop index if exists public.job_runs_active_chat_idx;
create index if not exists job_runs_active_chat_idx on public.job_runs (chat_id)
  where status in ('waiting', 'queued', 'processing', 'paused');

create or replace function handoff.promote_waiting_turn() returns trigger
language plpgsql as $$
begin
  if exists (
    select 1 from public.job_runs
    where chat_id = new.chat_id and assistant_id = new.assistant_id
      and status in ('queued', 'processing', 'paused')
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

drop trigger if exists job_runs_promote_waiting on public.job_runs;
create constraint trigger job_runs_promote_waiting
  after update of status on public.job_runs
  deferrable initially deferred
  for each row
  when (old.status in ('queued', 'processing', 'paused')
        and new.status in ('completed', 'error', 'canceled'))
  execute function handoff.promote_waiting_turn();
