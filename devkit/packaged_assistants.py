"""What the Lambda zips carry for the assistants ASSISTANTS names: the code their module lives
in and their models' provider packages, found as the Lambdas will load them."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from agent.assistants import AssistantDefinitionError, load_assistants
from agent.model import PROVIDER_EXTRAS
from infra.settings import Settings
from turns.assistants import model_name

# Packages of ours that one artefact leaves out, or both: the assistants' code cannot live there.
NOT_IN_BOTH = ("handlers", "functions", "devkit")


class AssistantsNotPackable(Exception):
    """The module ASSISTANTS names cannot be put into the artefacts; the message says why."""


@dataclass(frozen=True)
class AssistantsCode:
    """The assistants' module, the top-level package it is in (or the module itself, when it
    is one file) and the optional dependencies of their models' providers."""

    module: str
    # The top-level package's folder, or the module's own .py file.
    path: Path
    extras: tuple[str, ...]

    @property
    def top(self) -> str:
        return self.module.partition(".")[0]


def assistants_code(settings: Settings) -> AssistantsCode:
    """The code and extras of the assistants `settings.assistants` names, loaded (and so
    imported) here as a Lambda loads them; AssistantsNotPackable if they cannot be."""
    reference = settings.assistants
    module = reference.partition(":")[0]
    top = module.partition(".")[0]
    if top in NOT_IN_BOTH:
        raise AssistantsNotPackable(
            f"ASSISTANTS={reference}: {top}/ is not in both Lambda zips; put the assistants in"
            " a package of their own."
        )
    try:
        assistants = load_assistants(reference)
    except AssistantDefinitionError as exc:
        raise AssistantsNotPackable(str(exc)) from exc
    providers = {model_name(assistant, settings).partition(":")[0] for assistant in assistants}
    return AssistantsCode(
        module=module,
        path=_top_level_source(reference, top),
        extras=tuple(sorted(providers & PROVIDER_EXTRAS)),
    )


def _top_level_source(reference: str, top: str) -> Path:
    where = f"ASSISTANTS={reference}:"
    spec = importlib.util.find_spec(top)
    if spec is not None and spec.submodule_search_locations is not None:
        folders = list(spec.submodule_search_locations)
        if len(folders) != 1:
            raise AssistantsNotPackable(
                f"{where} the package {top!r} spans {len(folders)} folders; give it an"
                " __init__.py in one."
            )
        return Path(folders[0])
    if spec is not None and spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    origin = spec.origin if spec else None
    raise AssistantsNotPackable(f"{where} {top!r} is not Python source to copy ({origin}).")
