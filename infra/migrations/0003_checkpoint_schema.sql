-- LangGraph's checkpoint tables live outside `public`, which the Data API exposes. The runner
-- creates them from the saver's own migrations and points the connecting role's search_path
-- here (see infra/migrate.py).

create schema if not exists langgraph;
revoke all on schema langgraph from public, anon, authenticated;
