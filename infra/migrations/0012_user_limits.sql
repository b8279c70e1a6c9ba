-- The per-user limits (infra/store/limits.py). Each user's latest turns and chat creations, by
-- time: a request takes its place here first, which also makes requests of one user wait for
-- each other, and counts against the limit within the last minute. Outside the Data API, so a
-- user cannot make room by deleting their own messages or chats.
create table if not exists handoff.user_limits (
  user_id uuid primary key references auth.users (id) on delete cascade,
  turns timestamptz[] not null default '{}',
  chats timestamptz[] not null default '{}'
);

-- Active turns are counted on every request that starts one. job_runs gains a row per turn and
-- had no index by chat outside its slot: this one holds only the jobs that have not ended, so it
-- stays small however long the history grows.
create index if not exists job_runs_active_chat_idx on public.job_runs (chat_id)
  where status in ('waiting', 'queued', 'processing');
