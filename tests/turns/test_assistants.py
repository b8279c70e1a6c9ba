"""Start-up makes each assistant's model and compiles its graph: a model that cannot run here
stops the process with one sentence naming the assistant, its model and what to do."""

from __future__ import annotations

import pytest

from agent.assistants import Assistant, AssistantDefinitionError, Assistants
from infra.settings import Settings
from turns.assistants import checked, load_checked, turn_model_spec


@pytest.mark.parametrize(
    ("model", "deployment", "says"),
    [
        # The assistant's own model: its provider's key is set nowhere.
        ("openai:gpt-4o-mini", "scripted", "Assistant 'a': model=openai:gpt-4o-mini cannot be"),
        # A provider the project has no extra for, whose package is not installed.
        ("mistralai:mistral-small", "scripted", "langchain-mistralai"),
        ("gpt-4o-mini", "scripted", "Assistant 'a': model must be 'scripted' or 'provider:model'"),
        # No model of its own: the deployment's MODEL, named as such.
        (None, "openai:gpt-4o-mini", "Assistant 'a': MODEL=openai:gpt-4o-mini cannot be used"),
    ],
)
def test_a_model_that_cannot_run_here_stops_the_start(
    model: str | None, deployment: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assistants = Assistants([Assistant(id="a", name="A", model=model)])
    with pytest.raises(AssistantDefinitionError) as refused:
        checked(assistants, Settings(model=deployment))
    assert says in str(refused.value)


def test_each_assistant_runs_its_own_model_or_the_deployments() -> None:
    settings = Settings(model="scripted", openai_api_key="sk-test")
    own = Assistant(id="own", name="Own", model="openai:gpt-4o-mini")
    plain = Assistant(id="plain", name="Plain")
    checked(Assistants([own, plain]), settings)
    assert turn_model_spec(own, settings) == {"model": "openai:gpt-4o-mini"}
    assert turn_model_spec(plain, settings)["model"] == "scripted"


def test_the_setting_names_the_module_and_the_demo_is_the_default() -> None:
    assert [a.id for a in load_checked(Settings())] == ["default", "calculator"]
    custom = load_checked(Settings(assistants="tests.assistants_example:ASSISTANTS"))
    assert custom.get("planner") is not None
