-- Every turn holds its chat's job slot (one active job per chat and assistant) from its first
-- moment, so two messages sent together are ordered by the database, not by luck: `quick`
-- while the respond handler streams, `handoff` once tools continue in the background, `turn` for
-- a message enqueued behind another (the background runs the whole turn). A `waiting` job is
-- such an enqueued turn; it holds no slot until the job ahead of it ends.
alter table public.job_runs alter column root_message_id drop not null;
alter table public.job_runs add column if not exists kind text not null default 'handoff';
alter table public.job_runs drop constraint if exists job_runs_kind_check;
alter table public.job_runs add constraint job_runs_kind_check
  check (kind in ('quick', 'handoff', 'turn'));
alter table public.job_runs drop constraint if exists job_runs_status_check;
alter table public.job_runs add constraint job_runs_status_check check (
  status in ('waiting', 'queued', 'processing', 'completed', 'error', 'canceled')
);
create index if not exists job_runs_waiting_idx on public.job_runs (chat_id, assistant_id, created_at)
  where status = 'waiting';

-- When a job ends, the oldest turn waiting behind it takes the slot (status queued; its event
-- goes out like any handoff's, through the outbox). Deferred to commit, so a transaction that
-- ends a job and starts another one (an interrupting message) keeps the slot for its own.
create or replace function handoff.promote_waiting_turn() returns trigger
language plpgsql as $$
begin
  if exists (
    select 1 from public.job_runs
    where chat_id = new.chat_id and assistant_id = new.assistant_id
      and status in ('queued', 'processing')
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
  when (old.status in ('queued', 'processing')
        and new.status in ('completed', 'error', 'canceled'))
  execute function handoff.promote_waiting_turn();
