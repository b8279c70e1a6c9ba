-- A turn's start plans its statements once a session, not once a call. Nothing is prepared
-- behind a transaction pooler (infra/db.py), so a statement keeps its plan only inside a plpgsql
-- function; and plpgsql keeps a generic plan only when it estimates it no costlier than a plan
-- made for the call's values. Where it does not, it plans the statement again at every call:
-- with pg_stat_statements on PostgreSQL 15, 0.71 ms of planning each turn inside
-- `handoff.open_turn`, of it 0.24 ms for `handoff.active_checkpoint`'s read of the head alone.
-- Each of their statements finds its rows by key, so the generic plan is the one a call's
-- values would give.
--
-- A `create or replace` of one of these functions drops its settings: set this again there.
alter function handoff.open_turn(
  text, text, text, uuid, uuid, text, uuid, text, jsonb, integer, integer, text[], integer,
  integer, integer, bigint, double precision, double precision, text, text, text, uuid, jsonb
) set plan_cache_mode = force_generic_plan;
alter function handoff.start_turn(
  uuid, uuid, text, uuid, text, jsonb, boolean, integer, integer, text[], integer, integer,
  integer, bigint, double precision, double precision, text, text, text, uuid, jsonb, boolean
) set plan_cache_mode = force_generic_plan;
alter function handoff.admit(uuid, text, integer, integer, integer)
  set plan_cache_mode = force_generic_plan;
alter function handoff.take_slot(uuid, text, uuid, text, text, text, uuid)
  set plan_cache_mode = force_generic_plan;
alter function handoff.chat_route(uuid, uuid) set plan_cache_mode = force_generic_plan;
alter function handoff.active_checkpoint(uuid, text, text)
  set plan_cache_mode = force_generic_plan;
alter function handoff.promote_waiting_turn() set plan_cache_mode = force_generic_plan;
