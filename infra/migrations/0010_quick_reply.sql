-- A turn's reply exists from the moment its quick path starts streaming (status `streaming`,
-- its text in `message_draft`), and its quick job names it from the start, so a quick path that
-- dies mid-stream leaves a reply to end as interrupted. The job row is inserted first (it takes
-- the chat's slot before anything else) and the reply later in the same transaction, after the
-- user's message it answers: the reference is checked at commit.
alter table public.job_runs
  alter constraint job_runs_root_message_id_fkey deferrable initially deferred;
