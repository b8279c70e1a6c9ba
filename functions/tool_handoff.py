"""`tool-handoff`: resume the agent from its durable checkpoint, run tools as steps, finalize.

Inngest re-runs this handler from the top for every step and hands back memoized step outputs,
so everything outside `step.run` is deterministic and free of side effects: the plan of what to
do next is itself a step output, never a fresh database read.
"""

from __future__ import annotations

import json
import logging
import uuid
from functools import partial
from typing import Any

import inngest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import ValidationError

from agent.graph import (
    AgentGraph,
    CompiledGraphs,
    state_values,
)
from agent.snapshot import (
    APOLOGY,
    INCOMPATIBLE_VERSION,
    render_agent_snapshot,
)
from agent.state import (
    OLDEST_READABLE_SCHEMA_VERSION,
    SCHEMA_VERSION,
    checkpoint_schema,
    readable_schema,
)
from agent.threads import ThreadId, thread_config
from agent.tools import ToolInputError, demo_tools, requires_approval
from functions.approval_steps import await_decision, declined_text
from functions.rounds import Plan, Rounds, plan_from
from infra import chat_store
from infra.approvals import Decision
from infra.checkpoints import durable_saver
from infra.events import CANCEL_EVENT, HANDOFF_EVENT, HandoffPayload
from infra.job_control import hold_job
from infra.large_outputs import LargeOutputs
from infra.runtime import Services
from infra.tool_results import ToolResult, fetch_result, store_result
from infra.turns import send_queued_turns

logger = logging.getLogger(__name__)

FUNCTION_ID = "tool-handoff"
RETRIES = 4


class Claim(Plan):
    claimed: bool
    payload: dict[str, Any]  # the job's stored payload, which outranks the event's data


def create_tool_handoff(
    client: inngest.Inngest, services: Services, tools: list[BaseTool] | None = None
) -> inngest.Function[Any]:
    tools = tools if tools is not None else demo_tools()
    tools_by_name = {t.name: t for t in tools}
    settings = services.settings
    large_outputs = LargeOutputs(settings.large_output_bucket)

    graphs = CompiledGraphs()

    def graph_for(payload: HandoffPayload, saver: BaseCheckpointSaver[Any]) -> AgentGraph:
        return graphs.bound(
            payload.model_spec, tools, saver, max_tool_rounds=settings.max_tool_rounds
        )

    async def on_failure(ctx: inngest.Context) -> None:
        original = ctx.event.data.get("event")
        key = original.get("id") if isinstance(original, dict) else None
        if not isinstance(key, str):
            logger.error("failure event without the original event id")
            return
        error = json.dumps(ctx.event.data.get("error"), default=str)
        logger.error("tool handoff failed", extra={"job_id": key, "error": error})
        pool = await services.pool()
        await chat_store.fail_job(pool, idempotency_key=key, user_text=APOLOGY, error=error)
        data = original.get("data") if isinstance(original, dict) else None
        if isinstance(data, dict) and "chatId" in data and "assistantId" in data:
            chat = chat_store.ChatId(uuid.UUID(str(data["chatId"])))
            await send_queued_turns(pool, client, chat, str(data["assistantId"]))

    @client.create_function(
        fn_id=FUNCTION_ID,
        trigger=inngest.TriggerEvent(event=HANDOFF_EVENT),
        # Limits concurrent steps per chat, not runs: the job_runs claim keeps a job single.
        concurrency=[inngest.Concurrency(limit=1, key="event.data.chatId")],
        # POST /api/chat/{chatId}/cancel has already ended the job in the database; this stops
        # the run at its next step instead of letting it find out at its next write.
        cancel=[
            inngest.Cancel(
                event=CANCEL_EVENT, if_exp="event.data.rootMessageId == async.data.messageId"
            )
        ],
        retries=RETRIES,
        on_failure=on_failure,
    )
    async def tool_handoff(ctx: inngest.Context) -> dict[str, Any]:
        try:
            payload = HandoffPayload.model_validate(ctx.event.data)
        except ValidationError as exc:
            raise inngest.NonRetriableError("invalid chat/tool_handoff payload") from exc
        key = ctx.event.id
        if not key:
            raise inngest.NonRetriableError("chat/tool_handoff needs an event id")
        thread_id = ThreadId(payload.thread_id)
        config = thread_config(thread_id)
        log = {"chat_id": str(payload.chat_id), "job_id": key, "correlation_id": ctx.run_id}

        async def claim() -> Claim:
            job = await chat_store.claim_job(
                await services.pool(), key, ctx.run_id, lease_s=settings.job_lease_s
            )
            if job is None:
                return {"claimed": False, "done": True, "pending": [], "payload": {}}
            pool = await services.pool()
            stored = HandoffPayload.model_validate(job.payload)
            graph = graph_for(stored, durable_saver(pool))
            state = await graph.aget_state(thread_config(ThreadId(stored.thread_id)))
            version = checkpoint_schema(state.metadata)
            if not readable_schema(version):
                detail = (
                    f"checkpoint {state.config['configurable'].get('checkpoint_id')} was written"
                    f" by schema version {version}; this build reads"
                    f" {OLDEST_READABLE_SCHEMA_VERSION} to {SCHEMA_VERSION}"
                )
                logger.error(
                    "checkpoint from an incompatible version", extra={**log, "error": detail}
                )
                await chat_store.fail_job(
                    pool, idempotency_key=key, user_text=INCOMPATIBLE_VERSION, error=detail
                )
                raise inngest.NonRetriableError(detail)
            if stored.kind == "turn":
                return {
                    "claimed": True,
                    "payload": job.payload,
                    "done": False,
                    "pending": [],
                    "opening": True,
                }
            return {"claimed": True, "payload": job.payload, **plan_from(state)}

        async def run_tool(call: dict[str, Any], decision: Decision | None = None) -> ToolResult:
            pool = await services.pool()
            # A call that already ran (a replay of a failed job, a retry after a lost step
            # output) is not run again: its stored result is the result.
            stored = await fetch_result(pool, thread_id, call["id"])
            if stored is not None:
                return stored
            async with pool.connection() as conn:
                held = await hold_job(conn, key, ctx.run_id)
            if not held:
                # Canceled meanwhile: a tool that acts outside (an email) must not act now. The
                # round after this step finds the job gone and stops; nothing is stored.
                return ToolResult(id=call["id"], name=call["name"], content="")
            if decision is not None and not decision["approved"]:
                declined = ToolResult(
                    id=call["id"], name=call["name"], content=declined_text(call, decision)
                )
                return await store_result(pool, thread_id, declined)
            tool = tools_by_name.get(call["name"])
            if tool is None:
                raise inngest.NonRetriableError(f"unknown tool {call['name']!r}")
            try:
                # Invoked as a tool call, so a tool can take the call id (InjectedToolCallId)
                # as the idempotency key of whatever it does outside.
                output = await tool.ainvoke({**call, "type": "tool_call"})
            except (ToolInputError, ValidationError) as exc:
                raise inngest.NonRetriableError(f"invalid input for {call['name']}") from exc
            content = str(output.content if isinstance(output, ToolMessage) else output)
            result = ToolResult(id=call["id"], name=call["name"], content=content)
            shrunk = await large_outputs.shrink(
                job_key=key, call_id=call["id"], name=call["name"], content=content
            )
            if shrunk is not None:
                result["content"], result["artifact"] = shrunk["content"], shrunk["artifact"]
            return await store_result(pool, thread_id, result)

        async def finalize() -> None:
            pool = await services.pool()
            state = await graph_for(payload, durable_saver(pool)).aget_state(config)
            await chat_store.finalize_job(
                pool,
                idempotency_key=key,
                message_id=chat_store.MessageId(payload.root_message_id),
                content=render_agent_snapshot(state_values(state)).text,
                checkpoint_id=state.config["configurable"].get("checkpoint_id"),
            )
            chat = chat_store.ChatId(payload.chat_id)
            await send_queued_turns(pool, client, chat, payload.assistant_id)

        claimed = await ctx.step.run("claim", claim)
        if not claimed["claimed"]:
            logger.info("job already taken or finished; nothing to do", extra=log)
            return {"status": "skipped"}
        # From here on the job row, written by the request that handed off, says which thread,
        # message and model this is: the event only names the job. The steps above read these
        # names when they run, so rebinding them here is what they see.
        payload = HandoffPayload.model_validate(claimed["payload"])
        thread_id = ThreadId(payload.thread_id)
        config = thread_config(thread_id)
        plan: Plan = claimed
        round_no = 0
        message_id = chat_store.MessageId(payload.root_message_id)
        rounds = Rounds(services, graph_for, payload, key, ctx.run_id, log)
        if plan.get("opening"):
            plan = await ctx.step.run("model-round-opening", rounds.open)
        while not plan["done"]:
            # Calls that need the user's approval wait for it, one question at a time.
            decisions: dict[str, Decision] = {}
            for call in plan["pending"]:
                tool = tools_by_name.get(call["name"])
                if tool is not None and requires_approval(tool):
                    decided = await await_decision(
                        ctx, services, job_key=key, message_id=message_id, call=call
                    )
                    if decided is None:
                        logger.info("job canceled while awaiting approval; stopping", extra=log)
                        return {"status": "stopped", "rounds": round_no}
                    decisions[call["id"]] = decided
            results = await ctx.group.parallel(
                tuple(
                    partial(
                        ctx.step.run,
                        f"tool-{call['id']}",
                        run_tool,
                        call,
                        decisions.get(call["id"]),
                    )
                    for call in plan["pending"]
                )
            )
            plan = await ctx.step.run(f"model-round-{round_no}", rounds.resume, list(results))
            round_no += 1
        if plan.get("stopped"):
            logger.info("job canceled or taken over; stopping", extra=log)
            return {"status": "stopped", "rounds": round_no}
        await ctx.step.run("finalize", finalize)
        return {"status": "completed", "rounds": round_no}

    return tool_handoff
