-- A tool output too large to carry inline lives in S3 (infra/large_outputs.py); its reference
-- (uri, bytes, sha256) is kept beside the preview the model read.
alter table handoff.tool_results add column if not exists artifact jsonb;
