-- The first result of every tool call, kept outside the Data API. A run that resumes a job (a
-- dashboard replay after a failure, a retry after a crash) reuses a stored result instead of
-- running the tool again, so a tool with side effects (an email, a payment) acts once per call.

create table if not exists handoff.tool_results (
  thread_id text not null,
  tool_call_id text not null,
  name text not null,
  content text not null,
  created_at timestamptz not null default now(),
  primary key (thread_id, tool_call_id)
);
