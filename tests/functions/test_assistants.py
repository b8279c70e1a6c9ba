"""Assistants defined in a deployment's own module run through the whole stack, each with its
own graph, model, instructions and tools: respond, the quick path, the handoff, the background
tools and the reply."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

from agent.assistants import Assistant, Assistants
from agent.snapshot import ASSISTANT_GONE
from demo.assistants import ASSISTANTS as DEMO
from demo.tools import report
from tests import assistants_example
from tests.fake_providers import serve_fake_providers
from tests.support import (
    create_user_with_chat,
    durable_messages,
    fetch,
    running_stack,
    token_for,
)


async def test_a_custom_graph_plans_then_hands_off_its_tools_and_completes(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=["planner"])
    assistants = Assistants(assistants_example.ASSISTANTS)
    async with running_stack(database_url, assistants=assistants) as stack:
        # WHEN the planner is asked something that needs a tool
        body = {"chatId": str(chat_id), "content": "/calc 6*7", "assistantId": "planner"}
        events = await stack.respond(token_for(user_id), body)
        # THEN its quick path streams the agent's first tokens and hands the tool off
        assert events[0][1]["threadId"] == f"{chat_id}:planner"
        assert [kind for kind, _ in events if kind == "token"]
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle()
        assert stack.handoff_run().status == "completed"

    # AND the background ran the tool, and the agent answered with the plan in front of it
    [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert reply["status"] == "completed"
    assert "calc returned 42." in reply["content"]
    assert "Your plan: " in reply["content"]  # the scripted model says what it was told
    # AND the thread holds the turn, never the notes the model was given
    thread = await durable_messages(database_url, chat_id, "planner")
    assert [type(m).__name__ for m in thread] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert not any(isinstance(m, SystemMessage) for m in thread)


async def test_two_assistants_of_one_deployment_each_get_their_own(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=["default", "writer"])
    token = token_for(user_id)
    async with serve_fake_providers() as fake:
        # GIVEN the demo's helper (MODEL: scripted, the calc tool) and a writer with a model,
        # instructions and a tool of its own
        writer = Assistant(
            id="writer",
            name="Writer",
            model="openai:gpt-4o-mini",
            instructions="Answer in one line.",
            tools=[report],
        )
        assistants = Assistants([*DEMO, writer])
        keys: dict[str, Any] = {"openai_api_key": "test", "openai_base_url": fake.openai_base_url}
        async with running_stack(database_url, assistants=assistants, **keys) as stack:
            # WHEN each is asked to use calc
            helped = await stack.respond(token, {"chatId": str(chat_id), "content": "/calc 1+1"})
            written = await stack.respond(
                token, {"chatId": str(chat_id), "content": "/calc 1+1", "assistantId": "writer"}
            )
            await stack.executor.wait_idle()

    # THEN the helper (the default) calls it, with the deployment's model
    assert helped[-1][0] == "handoff"
    # AND the writer's model was sent its instructions and offered its own tool, not calc
    assert written[-1][0] == "done"
    [request] = fake.bodies("openai")
    assert request["model"] == "gpt-4o-mini"
    assert request["messages"][0] == {"role": "system", "content": "Answer in one line."}
    assert [t["function"]["name"] for t in request["tools"]] == ["report"]
    replies = await fetch(
        database_url, "select * from message where role = 'assistant' order by created_at"
    )
    assert [r["metadata"]["model"] for r in replies] == ["scripted", "openai:gpt-4o-mini"]
    assert "calc returned 2." in replies[0]["content"]
    helper_thread = await durable_messages(database_url, chat_id, "default")
    assert any(isinstance(m, ToolMessage) for m in helper_thread)
    writer_thread = await durable_messages(database_url, chat_id, "writer")
    # (the fake provider echoes what the user said)
    assert [m.content for m in writer_thread if isinstance(m, AIMessage)] == [
        'You said: "/calc 1+1"'
    ]


async def test_a_job_whose_assistant_is_gone_ends_failed_in_plain_words(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=["planner"])
    body = {"chatId": str(chat_id), "content": "/calc 6*7", "assistantId": "planner"}
    # GIVEN the planner's turn handed off, its event not yet sent (Inngest refused it)
    example = Assistants(assistants_example.ASSISTANTS)
    async with running_stack(database_url, assistants=example) as stack:
        stack.executor.refuse_events(5)
        events = await stack.respond(token_for(user_id), body)
        assert events[-1][0] == "handoff"
    [job] = await fetch(database_url, "select idempotency_key, payload from job_runs")
    # WHEN a build without the planner receives the event
    async with running_stack(database_url) as stack:
        event = {"name": "chat/tool_handoff", "id": job["idempotency_key"], "data": job["payload"]}
        stack.executor.send(event)
        await stack.executor.wait_idle()
    # THEN the job fails at once, and the reply says why in plain words after what it showed
    [job] = await fetch(database_url, "select status, error from job_runs")
    assert (job["status"], job["error"]) == ("error", "assistant_not_found")
    [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert reply["status"] == "error"
    assert reply["content"].endswith(f"({ASSISTANT_GONE})")
