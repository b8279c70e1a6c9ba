"""The demo's assistants (`ASSISTANTS=demo.assistants:ASSISTANTS`, the default): a helper with
every demo tool, first and so the default, and a calculator with arithmetic alone.

The helper's id is `default`, the assistant id every chat, branch and job had before assistants
were defined (the tables' column default too): the chats and the jobs in flight of an earlier
build stay its own.
"""

from __future__ import annotations

from agent.assistants import Assistant
from demo.tools import ask_user, calc, demo_tools

ASSISTANTS = [
    Assistant(
        id="default",
        name="Helper",
        description="Does arithmetic, waits, writes reports, sends email (once you approve it)"
        " and asks you when it needs to.",
        tools=demo_tools(),
        # The first hands off to the background at once; the second streams for two seconds
        # there first.
        starters=["/calc 2*21", "/sleep 2"],
    ),
    Assistant(
        id="calculator",
        name="Calculator",
        description="Works out arithmetic, step by step.",
        instructions="You are Calculator. Work out arithmetic with the calc tool, one step at"
        " a time, and answer with the result. Ask the user when the question is unclear.",
        tools=[calc, ask_user],
        max_tool_rounds=4,
        starters=["What is 6*7?"],
    ),
]
