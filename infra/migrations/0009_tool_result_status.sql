-- A call the tool could not answer (unknown tool, invalid arguments, a failure that outlasted
-- its retries) has an `error` result: the model reads it and goes on, and a replay reuses it
-- like any other result instead of running the tool again.
alter table handoff.tool_results add column if not exists status text not null default 'success';
alter table handoff.tool_results drop constraint if exists tool_results_status_check;
alter table handoff.tool_results add constraint tool_results_status_check
  check (status in ('success', 'error'));
