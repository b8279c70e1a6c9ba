"""The artefacts start on their own, as Lambda would start them.

Lambda's python3.12 is not here, so these artefacts are built the same way for this machine's
Python, unzipped with their permission bits, and run by an interpreter that sees nothing but
the artefact: a dependency left out by mistake, a run.sh that lost its exec bit or a wrong
PYTHONPATH fails here rather than at the first cold start.

They are packaged as a deployment with its own assistants packages them: `acme_agents`, a
package outside the checkout with a tool of its own and an OpenAI model, which MODEL (scripted)
does not name.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
import snapshot_restore_py

from devkit.lambda_package import build_artefacts
from devkit.packaged_assistants import assistants_code
from infra.settings import Settings
from tests.deploy.stack import ROOT, uv_binary
from tests.handlers.test_lambda_entries import SIGNING_KEY, signed_now
from tests.support import JWT_SECRET, create_user_with_chat, fetch, parse_sse, token_for

# Building both artefacts and unzipping them took 52 s alone on the 2-core machine, and over
# 120 s (the suite's limit a test) beside three other workers: the first test pays for it.
pytestmark = pytest.mark.timeout(360)
READY_WITHIN_S = 30
# What the entry modules need to start; none of it is ever used: no request reaches Postgres
# or Inngest here.
PLACEHOLDER_ENV = {
    "DATABASE_URL": "postgresql://handoff@127.0.0.1:9/handoff",
    "SUPABASE_JWT_SECRET": "placeholder-" + "x" * 32,
    "INNGEST_EVENT_KEY": "placeholder",
    "INNGEST_SIGNING_KEY": "signkey-prod-" + "0" * 64,
    # Both entries make every assistant's model at start: OpenAI's needs a key, never used.
    "OPENAI_API_KEY": "sk-placeholder",
}
ACME_ASSISTANTS = "acme_agents.assistants:ASSISTANTS"
ACME_SOURCES = {
    "__init__.py": '"""The assistants of Acme."""\n',
    "tools.py": (
        "from langchain_core.tools import tool\n"
        "@tool\n"
        "def stock_level(sku: str) -> str:\n"
        '    """How many of `sku` Acme has in stock."""\n'
        "    return f'{sku}: 3 in stock'\n"
    ),
    "assistants.py": (
        "from agent.assistants import Assistant\n"
        "from acme_agents.tools import stock_level\n"
        "ASSISTANTS = [\n"
        # The default answers offline, for the tests that run a turn in the artefact.
        "    Assistant(id='notes', name='Notes', model='scripted'),\n"
        "    Assistant(id='stock', name='Stock', model='openai:gpt-4o-mini',"
        " tools=[stock_level]),\n"
        "]\n"
    ),
}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each artefact unzipped as Lambda's /var/task, built for this machine's Python."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("the artefacts hold Linux x86_64 wheels")
    uv = uv_binary()
    work = tmp_path_factory.mktemp("artefacts")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for name, source in ACME_SOURCES.items():
        path = work / "project" / "acme_agents" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    # As `handoff package` runs with ASSISTANTS set and the package on the import path.
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(work / "project")
        assistants = assistants_code(Settings(assistants=ACME_ASSISTANTS, model="scripted"))
        assert assistants.extras == ("openai",)
        built = build_artefacts(
            ROOT,
            work / "dist",
            assistants,
            uv=uv,
            python_version=version,
            extras=assistants.extras,
        )
    tasks = {}
    for artefact in built:
        tasks[artefact.name] = work / artefact.name
        unzip_as_lambda_does(artefact.path, tasks[artefact.name])
    return tasks


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with no packages: only the artefact supplies imports."""
    venv = tmp_path_factory.mktemp("bare-python")
    command = [sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)]
    subprocess.run(command, check=True)  # noqa: S603
    return venv / "bin"


def unzip_as_lambda_does(archive_path: Path, task: Path) -> None:
    with zipfile.ZipFile(archive_path) as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, task))
            target.chmod((info.external_attr >> 16) & 0o777)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def task_env(bare_python: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": f"{bare_python}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(bare_python.parent),
        **PLACEHOLDER_ENV,
        "ASSISTANTS": ACME_ASSISTANTS,
        **extra,
    }


def run_in_task(
    task: Path, bare_python: Path, script: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`script` run by a bare interpreter in an unzipped artefact, as Lambda's runtime would."""
    result = subprocess.run(  # noqa: S603 - our own interpreter and a literal program
        [str(bare_python / "python"), "-c", script],
        cwd=task,
        env=task_env(bare_python, PYTHONPATH=str(task)),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


@contextmanager
def running(executable: Path, task: Path, env: dict[str, str]) -> Iterator[None]:
    """`executable` run from the task root, as the Web Adapter execs the handler path."""
    process = subprocess.Popen(  # noqa: S603
        [str(executable)],
        cwd=task,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
        if output:
            sys.stdout.write(output)


@pytest.fixture
def respond_server(tasks: dict[str, Path], bare_python: Path) -> Iterator[str]:
    port = free_port()
    env = task_env(bare_python, AWS_LWA_PORT=str(port))
    with running(tasks["respond"] / "handlers" / "run.sh", tasks["respond"], env):
        yield f"http://127.0.0.1:{port}"


def wait_ready(server: str) -> httpx.Response:
    """/healthz's answer, polled as the adapter polls it, within the cold start budget."""
    deadline = time.monotonic() + READY_WITHIN_S
    while True:
        try:
            return httpx.get(f"{server}/healthz", timeout=2)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_run_sh_serves_healthz_for_the_web_adapter(respond_server: str) -> None:
    # GIVEN the respond artefact started by run.sh, WHEN the adapter polls its readiness path,
    # THEN the app answers within the cold start budget
    response = wait_ready(respond_server)
    assert response.status_code == 200
    # The quick-path Lambda does not serve the Inngest endpoint (the other function's), nor the
    # API's documentation (development's).
    for path in ("/api/inngest", "/docs", "/redoc", "/openapi.json"):
        assert httpx.get(f"{respond_server}{path}", timeout=2).status_code == 404, path


def test_the_inngest_handler_refuses_an_unsigned_function_url_event(
    tasks: dict[str, Path], bare_python: Path
) -> None:
    # GIVEN the inngest artefact, WHEN the Lambda runtime imports functions.lambda_inngest and
    # calls its handler with an unsigned Function URL request, THEN the endpoint refuses it: only
    # Inngest's signed calls get the function list
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/api/inngest",
        "rawQueryString": "",
        "headers": {"host": "example.lambda-url.eu-central-1.on.aws"},
        "requestContext": {
            "http": {
                "method": "GET",
                "path": "/api/inngest",
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "test",
            },
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    script = (
        "import json, sys\n"
        "from functions.lambda_inngest import handler\n"
        "print(json.dumps(handler(json.loads(sys.stdin.read()), None)))\n"
    )
    result = run_in_task(tasks["inngest"], bare_python, script, stdin=json.dumps(event))
    response = json.loads(result.stdout.strip().splitlines()[-1])
    # The function list is Inngest's only: an unsigned call gets the SDK's refusal and nothing
    # about the app.
    assert response["statusCode"] == 401, response
    assert json.loads(response["body"]) == {"message": "Unauthorized"}


@pytest.mark.parametrize("artefact", ["respond", "inngest"])
def test_each_artefact_carries_the_users_assistants_and_their_providers_package(
    tasks: dict[str, Path], artefact: str
) -> None:
    task = tasks[artefact]
    assert (task / "acme_agents" / "assistants.py").is_file()
    assert (task / "acme_agents" / "tools.py").is_file()
    assert (task / "langchain_openai").is_dir()
    # The demo's assistants are not this deployment's.
    assert not (task / "demo").exists()


@pytest.mark.parametrize("artefact", ["respond", "inngest"])
def test_each_artefact_loads_the_users_assistants_with_their_model(
    tasks: dict[str, Path], bare_python: Path, artefact: str
) -> None:
    # GIVEN the artefacts packaged with ASSISTANTS=acme_agents.assistants:ASSISTANTS, WHEN a
    # bare interpreter loads and checks the assistants as the entries do at start (the OpenAI
    # model made), THEN they come from the artefact, with their own tool
    script = (
        "import acme_agents\n"
        "from infra.settings import Settings\n"
        "from turns.assistants import load_checked\n"
        "for assistant in load_checked(Settings()):\n"
        "    print(assistant.id, assistant.model, *(tool.name for tool in assistant.tools))\n"
        "print(acme_agents.__file__)\n"
    )
    result = run_in_task(tasks[artefact], bare_python, script)
    assert result.stdout.splitlines() == [
        "notes scripted",
        "stock openai:gpt-4o-mini stock_level",
        str(tasks[artefact] / "acme_agents" / "__init__.py"),
    ]


# --- SnapStart ----------------------------------------------------------------------------------

HOOKS = {
    "AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH": "/snapstart/before-checkpoint",
    "AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH": "/snapstart/after-restore",
}
# The app's connections to its database: every backend of it but the asking one.
APP_BACKENDS = (
    "select coalesce(array_agg(pid), '{}') as pids from pg_stat_activity"
    " where datname = current_database() and pid <> pg_backend_pid()"
)
BACKEND_EXIT_S = 5


async def backends(database_url: str) -> set[int]:
    [row] = await fetch(database_url, APP_BACKENDS)
    return set(row["pids"])


async def backends_once_settled(database_url: str) -> set[int]:
    """The app's backends, once those it closed have gone: a backend leaves pg_stat_activity
    as its process exits, a moment after the client said goodbye."""
    with suppress(TimeoutError):
        async with asyncio.timeout(BACKEND_EXIT_S):
            # Polls: a backend's exit signals nothing to another connection.
            while await backends(database_url):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    return await backends(database_url)


async def answer_in_full(server: str, chat_id: uuid.UUID, user_id: uuid.UUID) -> list[str]:
    """The names of the events of one respond call, to its end."""
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            f"{server}/api/chat/respond",
            json={"chatId": str(chat_id), "content": "hello"},
            headers={"authorization": f"Bearer {token_for(user_id)}"},
        )
    assert response.status_code == 200, response.text
    return [name for name, _ in parse_sse(response.content)]


async def post(url: str) -> int:
    async with httpx.AsyncClient(timeout=30) as client:
        return (await client.post(url)).status_code


async def test_the_respond_artefact_snapshots_without_connections_and_restores_with_new_ones(
    tasks: dict[str, Path], bare_python: Path, database_url: str
) -> None:
    # GIVEN the respond artefact started as the adapter starts it under SnapStart, with its
    # hooks named, and a first request served (the pool is open)
    port = free_port()
    env = task_env(bare_python, AWS_LWA_PORT=str(port), **HOOKS)
    env |= {"DATABASE_URL": database_url, "SUPABASE_JWT_SECRET": JWT_SECRET}
    env["SCRIPTED_TOKEN_DELAY_MS"] = "0"
    server = f"http://127.0.0.1:{port}"
    user_id, chat_id = await create_user_with_chat(database_url)
    with running(tasks["respond"] / "handlers" / "run.sh", tasks["respond"], env):
        await asyncio.to_thread(wait_ready, server)
        assert (await answer_in_full(server, chat_id, user_id))[-1] == "done"
        before = await backends(database_url)
        assert before

        # WHEN the adapter calls the hooks in their order: before the snapshot, after a restore
        checkpoint = await post(server + HOOKS["AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"])
        at_snapshot = await backends_once_settled(database_url)
        restore = await post(server + HOOKS["AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"])

        # THEN the snapshot holds no connection, and the next request makes its own
        assert (checkpoint, restore) == (204, 204)
        assert at_snapshot == set()
        assert (await answer_in_full(server, chat_id, user_id))[-1] == "done"
        after = await backends(database_url)
        assert after
        assert not after & before


def test_the_hooks_are_not_served_unless_the_adapter_names_them(respond_server: str) -> None:
    wait_ready(respond_server)
    for path in HOOKS.values():
        assert httpx.post(f"{respond_server}{path}", timeout=2).status_code == 404, path


async def test_the_inngest_artefact_runs_its_hooks_as_lambdas_python_runtime_does(
    tasks: dict[str, Path], bare_python: Path, database_url: str, tmp_path: Path
) -> None:
    # GIVEN the inngest artefact with the hooks' registry the runtime provides (/var/runtime),
    # and a step call served (the pool is open)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    shutil.copy(snapshot_restore_py.__file__, runtime)
    event = signed_now(SIGNING_KEY)
    script = textwrap.dedent(
        """
        import json, sys, time
        import psycopg
        from snapshot_restore_py import get_after_restore, get_before_snapshot
        from functions.lambda_inngest import handler

        def backends():
            with psycopg.connect(sys.argv[1]) as conn:
                rows = conn.execute(sys.argv[2]).fetchall()
            return sorted(rows[0][0])

        def backends_once_settled():
            # A closed connection's backend leaves a moment after it was told goodbye.
            deadline = time.monotonic() + 5
            while (pids := backends()) and time.monotonic() < deadline:
                time.sleep(0.05)
            return pids

        def step():
            return handler(json.loads(sys.argv[3]), None)["statusCode"]

        first, before = step(), backends()
        # As the runtime runs them: the before-snapshot hooks last registered first, the
        # after-restore hooks in their order.
        hooks = get_before_snapshot()
        while hooks:
            func, args, kwargs = hooks.pop()
            func(*args, **kwargs)
        at_snapshot = backends_once_settled()
        for func, args, kwargs in get_after_restore():
            func(*args, **kwargs)
        second, after = step(), backends()
        print(json.dumps([first, before, at_snapshot, second, after]))
        """
    )
    env = task_env(bare_python, PYTHONPATH=f"{tasks['inngest']}{os.pathsep}{runtime}") | {
        "DATABASE_URL": database_url,
        "INNGEST_SIGNING_KEY": SIGNING_KEY,
    }
    # WHEN the runtime imports the entry, calls it, snapshots, restores and calls it again
    result = await asyncio.to_thread(
        subprocess.run,
        [str(bare_python / "python"), "-c", script, database_url, APP_BACKENDS, json.dumps(event)],
        cwd=tasks["inngest"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    first, before, at_snapshot, second, after = json.loads(result.stdout.splitlines()[-1])
    # THEN both calls ran their step; the snapshot held no connection; the second call made its own
    assert (first, second) == (206, 206)
    assert before
    assert at_snapshot == []
    assert after
    assert not set(after) & set(before)
