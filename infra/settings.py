"""The one place that reads the environment."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The share of Inngest's 32 MB run state that a turn's tool outputs may take, all rounds
# together (infra/large_outputs.py); the rest holds the event, the plans (the model's calls)
# and the other steps' outputs.
TOOL_OUTPUT_STATE_BYTES = 24 * 1024 * 1024
# The least each tool output of a round may be bounded to: room for its note and a useful start.
MIN_OUTPUT_BYTES = 4 * 1024


class ModelPrice(BaseModel):
    """What a model costs, in US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class Settings(BaseSettings):
    """Runtime configuration, from environment variables (case-insensitive)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", frozen=True)

    database_url: str | None = None
    # The deployment's assistants, `module:attribute` (docs/assistants.md).
    assistants: str = "demo.assistants:ASSISTANTS"
    # The most assistants one message may @-mention: each one mentioned answers it (docs/api.md).
    max_assistants_per_message: int = Field(default=3, gt=0)
    # The model of every assistant that names none of its own.
    model: str = "scripted"
    scripted_token_delay_ms: int = Field(default=15, ge=0)
    # A provider's key and endpoint, like every other secret from the environment or SSM.
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None

    supabase_url: str | None = None
    supabase_jwt_secret: SecretStr | None = None
    jwt_audience: str = "authenticated"

    inngest_event_key: SecretStr | None = None
    inngest_signing_key: SecretStr | None = None
    inngest_dev: str | None = None
    inngest_base_url: str | None = None
    inngest_app_id: str = "handoff"

    # On AWS: the Parameter Store path holding the secrets (infra/secrets.py), e.g. /handoff/prod.
    ssm_parameter_path: str | None = Field(default=None, pattern=r"^(/[\w.\-]+)+/?$")
    # Tool outputs past their bound (256 KB at most) go to this S3 bucket; without one they are
    # cut short (infra/large_outputs.py).
    large_output_bucket: str | None = None
    # Checkpoints and tool results no branch, message or unfinished job can still need are
    # deleted once older than this many days (infra/store/retention.py); unset: all are kept.
    retention_days: int | None = Field(default=None, gt=0)

    max_content_chars: int = Field(default=16_000, gt=0)
    max_body_bytes: int = Field(default=64_000, gt=0)
    max_tool_rounds: int = Field(default=8, gt=0)
    # Tool calls of one round that run; the model is told the rest were not run (each call is
    # an Inngest step, and a run has at most 1,000).
    max_parallel_tool_calls: int = Field(default=16, gt=0)
    # The bytes the tool outputs of one round may take in the run's state, shared evenly by the
    # calls that run (each at most 256 KB). With MAX_TOOL_ROUNDS rounds, 16 MB of Inngest's
    # 32 MB run state at most.
    tool_round_budget_bytes: int = Field(default=2 * 1024 * 1024, gt=0)
    # A tool call running longer is stopped and answered with an error. Keep it below the
    # inngest function's timeout (serverless.yml), or the platform ends the step first.
    tool_timeout_s: float = Field(default=120.0, gt=0)
    # Output tokens a turn's model calls may write before no further round of tools runs
    # (unset: no budget beyond the rounds).
    max_turn_output_tokens: int | None = Field(default=None, gt=0)
    draft_interval_ms: int = Field(default=250, ge=0)
    draft_max_bytes: int = Field(default=2048, gt=0)
    # How a streaming reply's drafts reach Realtime subscribers (infra/store/drafts.py): `table`,
    # whole drafts as `message_draft` rows (Postgres Changes), or `broadcast`, what each write
    # added, sent with realtime.send() on the chat's private channel in the write's transaction.
    draft_transport: Literal["table", "broadcast"] = "table"
    db_pool_max_size: int = Field(default=10, gt=0)
    # A quick path renews its chat's slot every third of this while it streams; one silent this
    # long is taken for dead (its process stopped mid-stream): its reply ends interrupted and
    # the chat is free again.
    turn_lease_s: float = Field(default=30.0, gt=0)
    # How long a quick path may stream an answer, counted from its request, and how long one
    # background model round may stream. Past it the answer so far is the answer, marked as
    # interrupted. Each stays below its Lambda's timeout (serverless.yml: 120 s and 300 s), so
    # the answer is stored instead of the process being killed mid-write.
    quick_budget_s: float = Field(default=100.0, gt=0)
    round_budget_s: float = Field(default=240.0, gt=0)
    # A job whose run showed no progress for this long may be taken over by a replay.
    job_lease_s: float = Field(default=900.0, gt=0)
    # A tool call that needs approval waits this long for the user's answer (Inngest counts
    # whole seconds).
    approval_timeout_s: int = Field(default=1800, ge=1)
    # An edit's cascade regenerates at most this many dependent replies before it asks the
    # editor whether to go on (and as many again per approval); the card waits
    # `approval_timeout_s`, then the rest stay as they are (turns/cascade.py).
    cascade_limit: int = Field(default=5, ge=1)
    # A question the model asks (`ask_user`) waits this long for the user's answer; then the
    # model is told nobody answered and goes on. Past `max_questions_per_turn` questions in one
    # turn, a further one is not put to the user: the model gets an error result.
    question_timeout_s: int = Field(default=1800, ge=1)
    max_questions_per_turn: int = Field(default=3, ge=0)
    # A paused job waits this long to be resumed; then it ends `canceled`, and the chat is free.
    pause_timeout_s: int = Field(default=24 * 3600, ge=1)
    # Those three waits read the database whenever a wait of theirs ends without its event
    # (functions/wakes.py): the first after this long, each next one four times as long, at
    # most `wait_recheck_max_s`. A wake-up sent before its wait began is acted on by then.
    wait_recheck_s: int = Field(default=2, ge=1)
    wait_recheck_max_s: int = Field(default=3600, ge=1)
    # The outbox relay re-sends handoff events no request confirmed after this long.
    outbox_grace_s: float = Field(default=10.0, ge=0)
    # Per user, counted in Postgres so that they hold across processes (infra/store/limits.py):
    # turns not yet ended (waiting, queued or running), turns started in the last 60 s, chats
    # created in the last 60 s. Past one, the request is answered 429 and stores nothing.
    max_active_turns_per_user: int = Field(default=5, gt=0)
    max_turns_per_minute: int = Field(default=20, gt=0)
    max_chats_per_minute: int = Field(default=10, gt=0)
    # Members a chat may have besides its owner (infra/store/members.py); past it, adding one
    # is answered 422.
    max_members_per_chat: int = Field(default=20, ge=0)
    # Tokens (input and output) a user's replies may use per day, from midnight UTC; once they
    # have, new turns are answered 429 until the next midnight (unset: no budget).
    max_user_daily_tokens: int | None = Field(default=None, gt=0)
    # What each model costs, by the name replies record (`MODEL`'s `provider:model`), in USD per
    # million tokens, as JSON: {"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}}. Usage
    # summaries estimate a cost from it; a model it does not name has none.
    model_prices: dict[str, ModelPrice] = Field(default_factory=dict)

    @field_validator("model_prices", mode="before")
    @classmethod
    def _prices_from_json(cls, value: Any) -> Any:
        """The environment's JSON is parsed already; a Parameter Store value arrives as text."""
        return json.loads(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _tool_outputs_fit_the_run(self) -> Settings:
        """A turn's tool outputs must fit Inngest's run state, and each must have room."""
        total = self.max_tool_rounds * self.tool_round_budget_bytes
        if total > TOOL_OUTPUT_STATE_BYTES:
            raise ValueError(
                f"MAX_TOOL_ROUNDS times TOOL_ROUND_BUDGET_BYTES is {total:,} bytes, more than the"
                f" {TOOL_OUTPUT_STATE_BYTES:,} a turn's tool outputs may take of Inngest's 32 MB"
                " run state: lower one of them"
            )
        if self.tool_round_budget_bytes // self.max_parallel_tool_calls < MIN_OUTPUT_BYTES:
            raise ValueError(
                f"TOOL_ROUND_BUDGET_BYTES leaves less than {MIN_OUTPUT_BYTES:,} bytes for each"
                " of MAX_PARALLEL_TOOL_CALLS outputs: raise it, or lower MAX_PARALLEL_TOOL_CALLS"
            )
        return self

    def model_options(self, model: str) -> dict[str, Any]:
        """What a `provider:model` is made with: its provider's key and endpoint, when set."""
        provider = model.partition(":")[0]
        key = {"openai": self.openai_api_key, "anthropic": self.anthropic_api_key}.get(provider)
        url = {"openai": self.openai_base_url, "anthropic": self.anthropic_base_url}.get(provider)
        options: dict[str, Any] = {}
        if key is not None:
            options["api_key"] = key.get_secret_value()
        if url:
            options["base_url"] = url
        return options

    @property
    def inngest_is_dev_server(self) -> bool:
        """True when events go to an Inngest dev server (unsigned requests, no keys)."""
        return bool(self.inngest_dev) and self.inngest_dev not in {"0", "false", "False"}

    @property
    def inngest_origin(self) -> str | None:
        """Base URL of the Inngest server: the dev server, a self-hosted one or the local intake."""
        if self.inngest_base_url:
            return self.inngest_base_url
        if self.inngest_dev and self.inngest_dev.startswith("http"):
            return self.inngest_dev
        return None
