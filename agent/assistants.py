"""Assistants: the agents a deployment runs, defined in the user's own module.

A deployment names its assistants with one setting, `ASSISTANTS=<module>:<attribute>` (the
default is the demo set). The attribute is a sequence of `Assistant`. Each assistant keeps its
own LangGraph thread in a chat (`{chat_id}:{assistant_id}`), so its id is stable: it is part of
thread keys and rows.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from agent.graph import GraphFactory
from agent.threads import ASSISTANT_ID_PATTERN


class AssistantDefinitionError(ValueError):
    """An assistant definition Handoff cannot run: the message names the assistant and the
    problem in one sentence."""


class UnknownAssistant(LookupError):
    """No assistant of this deployment has the id asked for (`assistant_id`)."""

    def __init__(self, assistant_id: str) -> None:
        super().__init__(assistant_id)
        self.assistant_id = assistant_id


@dataclass(frozen=True)
class Assistant:
    """One agent: who it is, the model it calls, what it is told and the tools it may use.

    `model` is `scripted` or `provider:model`; None takes the deployment's `MODEL`. The limits
    are None to take the deployment's (`MAX_TOOL_ROUNDS`, `MAX_TURN_OUTPUT_TOKENS`). `starters`:
    messages a chat page offers to begin a conversation with it (`GET /api/assistants`).
    """

    id: str
    name: str
    description: str = ""
    model: str | None = None
    instructions: str = ""
    tools: Sequence[BaseTool] = field(default_factory=tuple)
    max_tool_rounds: int | None = None
    max_output_tokens: int | None = None
    graph: GraphFactory | None = None
    starters: Sequence[str] = field(default_factory=tuple)


class Assistants:
    """A deployment's assistants, by id, in the order they were defined; the first is the
    default."""

    def __init__(self, assistants: Sequence[Assistant]) -> None:
        check_definitions(assistants)
        self._by_id = {a.id: a for a in assistants}

    def __iter__(self) -> Iterator[Assistant]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, assistant_id: str) -> Assistant | None:
        return self._by_id.get(assistant_id)

    def pick(self, assistant_id: str | None) -> Assistant:
        """The assistant `assistant_id` names, the default one for None; UnknownAssistant for
        an id no assistant has."""
        if assistant_id is None:
            return self.default
        assistant = self._by_id.get(assistant_id)
        if assistant is None:
            raise UnknownAssistant(assistant_id)
        return assistant

    @property
    def default(self) -> Assistant:
        return next(iter(self._by_id.values()))


def check_definitions(assistants: Sequence[Assistant]) -> None:
    """What can be checked without making a model or a graph: at least one assistant, each an
    `Assistant` with a valid, unique id, a name, and tools that are LangChain tools with unique
    names."""
    if not assistants:
        raise AssistantDefinitionError("ASSISTANTS names no assistant; define at least one.")
    seen: set[str] = set()
    for assistant in assistants:
        if not isinstance(assistant, Assistant):
            raise AssistantDefinitionError(
                f"ASSISTANTS holds {assistant!r}, which is not an Assistant."
            )
        _check_one(assistant)
        if assistant.id in seen:
            raise AssistantDefinitionError(f"Two assistants have the id {assistant.id!r}.")
        seen.add(assistant.id)


def _check_one(assistant: Assistant) -> None:
    who = f"Assistant {assistant.id!r}"
    if not ASSISTANT_ID_PATTERN.fullmatch(assistant.id):
        raise AssistantDefinitionError(f"{who}: an id is 1 to 64 letters, digits, '_' or '-'.")
    if not assistant.name.strip():
        raise AssistantDefinitionError(f"{who} has no name.")
    if assistant.graph is not None and not callable(assistant.graph):
        raise AssistantDefinitionError(f"{who}: graph must be a function of AgentParts.")
    names: set[str] = set()
    for tool in assistant.tools:
        if not isinstance(tool, BaseTool):
            raise AssistantDefinitionError(f"{who}: {tool!r} is not a LangChain tool.")
        if tool.name in names:
            raise AssistantDefinitionError(f"{who} has two tools named {tool.name!r}.")
        names.add(tool.name)
    if isinstance(assistant.starters, str) or not all(
        isinstance(s, str) and s.strip() for s in assistant.starters
    ):
        raise AssistantDefinitionError(f"{who}: starters must be a list of messages, none blank.")
    for limit in ("max_tool_rounds", "max_output_tokens"):
        value = getattr(assistant, limit)
        if value is not None and value <= 0:
            raise AssistantDefinitionError(f"{who}: {limit} must be positive, not {value}.")


def _import_failure(module_name: str, exc: Exception) -> str:
    """Why the module did not import, in a clause: a package not on the import path says where
    it must be; an error the module's own code raised says where it was raised."""
    if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.partition(".")[0]:
        return f"{exc}; put the folder that holds it on PYTHONPATH"
    if isinstance(exc, ImportError):
        return str(exc)
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def load_assistants(reference: str) -> Assistants:
    """The assistants `reference` (`module:attribute`) names, checked."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise AssistantDefinitionError(
            f"ASSISTANTS must be 'module:attribute' (my_app.assistants:ASSISTANTS), not"
            f" {reference!r}."
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise AssistantDefinitionError(
            f"ASSISTANTS={reference}: module {module_name!r} cannot be imported"
            f" ({_import_failure(module_name, exc)})."
        ) from exc
    defined = getattr(module, attribute, None)
    if defined is None:
        raise AssistantDefinitionError(
            f"ASSISTANTS={reference}: module {module_name!r} has no {attribute!r}."
        )
    if isinstance(defined, Assistant) or not isinstance(defined, Sequence):
        raise AssistantDefinitionError(
            f"ASSISTANTS={reference} must be a sequence of Assistant, not {type(defined).__name__}."
        )
    return Assistants(list(defined))
