"""The deployment's assistants, loaded once per process and checked before it serves anything:
each one's model made (its provider's package installed, its key present) and its graph built
and compiled, so that a broken definition stops the process at start with one sentence."""

from __future__ import annotations

from typing import Any

from agent.assistant_graph import CompiledGraphs
from agent.assistants import Assistant, AssistantDefinitionError, Assistants, load_assistants
from agent.model import ModelUnavailable, check_model, model_spec
from infra.settings import Settings

# Compiled once per assistant and model spec in this process, not once per turn or round.
GRAPHS = CompiledGraphs()


def load_checked(settings: Settings) -> Assistants:
    """The assistants ASSISTANTS names, each ready to run; AssistantDefinitionError if not."""
    return checked(load_assistants(settings.assistants), settings)


def checked(assistants: Assistants, settings: Settings) -> Assistants:
    """`assistants`, once each one's model is made and its graph compiled (the graphs stay
    compiled for the turns); AssistantDefinitionError, naming the assistant, if one cannot
    run."""
    for assistant in assistants:
        name = model_name(assistant, settings)
        options = settings.model_options(name)
        try:
            check_model(name, options, setting="model" if assistant.model else "MODEL")
        except ModelUnavailable as exc:
            raise AssistantDefinitionError(f"Assistant {assistant.id!r}: {exc}") from exc
        GRAPHS.graph(
            assistant,
            turn_model_spec(assistant, settings),
            max_tool_rounds=settings.max_tool_rounds,
            max_output_tokens=settings.max_turn_output_tokens,
            model_options=options,
        )
    return assistants


def model_name(assistant: Assistant, settings: Settings) -> str:
    """The assistant's own model, else the deployment's MODEL."""
    return assistant.model or settings.model


def turn_model_spec(assistant: Assistant, settings: Settings) -> dict[str, Any]:
    """The model spec a new turn of `assistant` carries (agent/model.py)."""
    name = model_name(assistant, settings)
    return model_spec(name, token_delay_ms=settings.scripted_token_delay_ms)
