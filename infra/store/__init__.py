"""The database, one module per table group.

`jobs` is the `job_runs` state machine and `outbox` its unsent events; `messages`, `drafts`,
`chats`, `branches` (the message DAG's marks and the history), `approvals`, `checkpoints`
(LangGraph's saver on our pool) and `tool_results` hold the rest. `access` runs statements as
the user (RLS) or as the service, the way PostgREST does.
"""
