-- A message whose background job waits for the user to approve a tool call is
-- `awaiting_approval`, with the call in metadata.pendingApproval (infra/store/approvals.py).
alter table public.message drop constraint if exists message_status_check;
alter table public.message add constraint message_status_check check (
  status in ('queued', 'streaming', 'awaiting_approval', 'completed', 'error', 'canceled')
);
drop index if exists public.message_active_idx;
create index if not exists message_active_idx on public.message (status)
  where status in ('queued', 'streaming', 'awaiting_approval');
