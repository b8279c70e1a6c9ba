"""`handoff dev`, `handoff chat`, `handoff migrate`, `handoff usage`, `handoff prune` and
`handoff package`.

Each command imports what it runs when it runs: `handoff chat` starts in a fraction of the
time the whole app takes to import.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from infra.settings import ModelPrice
    from infra.store.retention import Pruned
    from infra.store.usage import Tally, UserModelTally

# The checkout: `handoff package` reads its uv.lock and copies its packages.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def command_line() -> argparse.ArgumentParser:
    """`handoff`'s commands and their options."""
    parser = argparse.ArgumentParser(prog="handoff")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="run the whole stack locally")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument(
        "--data-dir",
        type=Path,
        help="what is kept between starts: the embedded Postgres, the demo user's token secret"
        " (default: handoff-dev-<uid> in the temporary directory)",
    )
    commands.add_parser("migrate", help="apply migrations to DATABASE_URL")
    usage = commands.add_parser(
        "usage", help="tokens, turns, tool calls and cost per user and model, from DATABASE_URL"
    )
    usage.add_argument("--user", type=uuid.UUID, help="one user's id (default: every user)")
    usage.add_argument(
        "--days", type=positive, help="today (UTC) and the N - 1 days before (default: all time)"
    )
    prune = commands.add_parser(
        "prune",
        help="delete the checkpoints and tool results no branch, message or unfinished job can"
        " still need, from DATABASE_URL",
    )
    prune.add_argument("--days", type=positive, help="older than N days (default: RETENTION_DAYS)")
    prune.add_argument("--dry-run", action="store_true", help="count what would go, delete nothing")
    add_chat_command(commands)
    package = commands.add_parser("package", help="build the Lambda zips serverless.yml deploys")
    package.add_argument("--out", type=Path, default=PROJECT_ROOT / "dist")
    package.add_argument("--uv", default=shutil.which("uv"), help="uv binary (default: on PATH)")
    package.add_argument("--python", type=Path, help="a Python of Lambda's version to compile with")
    package.add_argument(
        "--extra",
        action="append",
        help="another optional dependency group to ship, beyond those of the assistants'"
        " model providers",
    )
    return parser


def add_chat_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`handoff chat` and its options."""
    chat = commands.add_parser("chat", help="send a message to a running `handoff dev`")
    chat.add_argument("message", nargs="?")
    chat.add_argument(
        "--history",
        action="store_true",
        help="print the chat (senders, stale replies and their replacements) and answer an"
        " edit's cascade card, instead of sending a message",
    )
    chat.add_argument(
        "--chat", type=uuid.UUID, help="chat id (default: the demo chat, or --as's own chat)"
    )
    chat.add_argument(
        "--as",
        dest="as_email",
        metavar="EMAIL",
        help="act as this local user instead of the demo user (made on first use, with a chat"
        " of their own): a second person in a shared chat",
    )
    chat.add_argument("--url", default="http://127.0.0.1:8000", help="the dev server")
    chat.add_argument(
        "--assistant",
        metavar="ID",
        help="the assistant to ask (default: the chat's, or whom the message @-mentions)",
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = command_line()
    args = parser.parse_args(argv)
    if args.command == "package":
        if not args.uv:
            parser.error("uv is not on PATH: pass --uv /path/to/uv")
        from devkit.package_command import package_lambdas

        sys.exit(package_lambdas(args.out, args.uv, tuple(args.extra or ()), args.python))
    if args.command == "chat":
        run_chat(parser, args)
    from infra.logs import configure_logging
    from infra.settings import Settings

    configure_logging()
    if args.command == "migrate":
        from agent.assistants import AssistantDefinitionError, load_assistants
        from infra.migrate import migrate

        settings = Settings()
        if not settings.database_url:
            parser.error("DATABASE_URL is not set")
        try:
            # The catalogue of assistants follows the code; their models are not made here,
            # where the providers' keys need not be.
            assistants = load_assistants(settings.assistants)
        except AssistantDefinitionError as exc:
            parser.exit(1, f"handoff migrate: {exc}\n")
        applied = asyncio.run(migrate(settings.database_url, assistants))
        print(
            f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else "")
        )
        return
    if args.command == "usage":
        settings = Settings()
        if not settings.database_url:
            parser.error("DATABASE_URL is not set")
        since = days_since(args.days, datetime.now(UTC)) if args.days else None
        rows = asyncio.run(read_usage(settings.database_url, args.user, since))
        print(usage_table(rows, settings.model_prices))
        return
    if args.command == "prune":
        settings = Settings()
        if not settings.database_url:
            parser.error("DATABASE_URL is not set")
        days = args.days or settings.retention_days
        if days is None:
            parser.error("RETENTION_DAYS is not set: pass --days N")
        before = datetime.now(UTC) - timedelta(days=days)
        pruned = asyncio.run(prune_threads(settings.database_url, before, args.dry_run))
        print(pruned_text(pruned, dry_run=args.dry_run))
        return
    try:
        sys.exit(run_dev(args.host, args.port, args.data_dir))
    except KeyboardInterrupt:  # Ctrl-C while it still loads
        sys.exit(130)


def run_chat(parser: argparse.ArgumentParser, args: argparse.Namespace) -> NoReturn:
    from devkit import terminal_chat

    if args.message is None and not args.history:
        parser.error("chat: a message to send, or --history")
    chat = (args.chat, args.assistant, args.history, args.as_email)
    sys.exit(terminal_chat.run(args.url, args.message, *chat))


def run_dev(host: str, port: int, data_dir: Path | None) -> int:
    from agent.assistants import AssistantDefinitionError
    from devkit import dev_server
    from devkit.dev_home import DevHome, default_dev_dir
    from devkit.dev_logs import log_for_terminal
    from infra.settings import Settings
    from turns.assistants import load_checked

    log_for_terminal()
    settings = Settings()
    try:
        # Before anything starts: a definition that cannot run stops here, in one sentence.
        assistants = load_checked(settings)
    except AssistantDefinitionError as exc:
        print(f"handoff dev: {exc}", file=sys.stderr)
        return 1
    home = DevHome(data_dir or default_dev_dir())
    return dev_server.run(settings, host, port, home, assistants)


def positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def days_since(days: int, now: datetime) -> datetime:
    """The start of today (UTC) and the `days` - 1 days before it."""
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=days - 1)


async def read_usage(
    database_url: str, user_id: uuid.UUID | None, since: datetime | None
) -> list[UserModelTally]:
    """Every user's figures (or one's) by model, as the service: no RLS."""
    from infra.db import connect
    from infra.store import usage

    async with await connect(database_url) as conn:
        return await usage.by_user(conn, user_id=user_id, since=since)


async def prune_threads(database_url: str, before: datetime, dry_run: bool) -> Pruned:
    """Prune (or count) what no thread can still need from before `before`, as the service."""
    from infra.db import connect
    from infra.store import retention

    async with await connect(database_url) as conn:
        return await retention.prune(conn, before, dry_run=dry_run)


def pruned_text(pruned: Pruned, *, dry_run: bool) -> str:
    """The rows pruned, by table, in one line."""
    verb = "would delete" if dry_run else "deleted"
    return (
        f"{verb} {pruned.checkpoints:,} checkpoint(s), {pruned.blobs:,} blob(s),"
        f" {pruned.writes:,} pending write(s), {pruned.tool_results:,} tool result(s)"
    )


USAGE_COLUMNS = (
    "user",
    "email",
    "model",
    "turns",
    "input tokens",
    "output tokens",
    "tool calls",
    "cost USD",
)


def usage_table(rows: Sequence[UserModelTally], prices: Mapping[str, ModelPrice]) -> str:
    """One line per user and model, then the total; a cost only where MODEL_PRICES has one."""
    from infra.store.usage import Tally, estimated_cost, sum_costs

    if not rows:
        return "no usage recorded"

    def cost_text(cost: float | None) -> str:
        return "" if cost is None else f"{cost:.4f}"

    lines: list[tuple[str, ...]] = [USAGE_COLUMNS]
    costs = []
    for row in rows:
        cost = estimated_cost(row.model, row.tally, prices)
        costs.append(cost)
        lines.append(
            (
                str(row.user_id),
                row.email or "",
                row.model or "(unknown)",
                *_tally_cells(row.tally),
                cost_text(cost),
            )
        )
    total = sum((row.tally for row in rows), Tally())
    users = len({row.user_id for row in rows})
    total_cost = sum_costs(costs) if prices else None
    label = f"total ({users} user{'' if users == 1 else 's'})"
    lines.append((label, "", "", *_tally_cells(total), cost_text(total_cost)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(USAGE_COLUMNS))]
    # Names to the left, figures to the right.
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < 3 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    )


def _tally_cells(tally: Tally) -> tuple[str, str, str, str]:
    return (
        f"{tally.turns:,}",
        f"{tally.input_tokens:,}",
        f"{tally.output_tokens:,}",
        f"{tally.tool_calls:,}",
    )
