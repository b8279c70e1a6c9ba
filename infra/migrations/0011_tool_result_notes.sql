-- What the user is told about a call's result when it is not the tool's whole output: cut short
-- to its bound, read by the model as a preview of the copy in S3, or stopped after its time
-- budget (infra/large_outputs.py, turns/job.py). Shown on the call's progress entry.
alter table handoff.tool_results add column if not exists note text;
