"""The chat page of `handoff dev` in a real Chromium, for a chat of two people and for an edit's
cascade: the owner adds a second user by e-mail in the members panel, that user (another
browser context, the page opened as theirs with `/?as=<email>`) sees the chat marked as shared,
writes in it, and the owner sees their name on the message; an edit in a chat of both demo
assistants brings the cascade's card, the replaced messages stay shown as stale with a link to
what replaced them, and Continue lets the cascade regenerate the rest.

`shared_chat_page.mjs` drives both pages and prints a report; this test starts the real
`handoff dev` (CASCADE_LIMIT 1, so that the second dependent waits on the card), and holds the
report against the database.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.test_chat_page import PLAYWRIGHT_CORE, node_binary
from tests.dev_server import dev_servers, start_handoff_dev
from tests.support import fetch

DRIVER = Path(__file__).with_name("shared_chat_page.mjs")
DRIVER_TIMEOUT_S = 150
MEMBER_EMAIL = "bea@example.com"
OWNER_EMAIL = "demo@handoff.local"


async def drive(node: str, origin: str, out: Path, member: dict[str, str]) -> dict[str, Any]:
    child = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        origin,
        str(out),
        str(PLAYWRIGHT_CORE),
        json.dumps(member),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(DRIVER_TIMEOUT_S):
            stdout, stderr = await child.communicate()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert child.returncode == 0, stderr.decode() + stdout.decode()
    report: dict[str, Any] = json.loads(stdout.decode().splitlines()[-1])
    return report


async def replaced_by(database_url: str, ids: list[str]) -> dict[str, str | None]:
    rows = await fetch(
        database_url,
        "select id::text, metadata ->> 'replacedBy' as by from message where id = any(%s)",
        [uuid.UUID(i) for i in ids],
    )
    return {r["id"]: r["by"] for r in rows}


@pytest.mark.timeout(200)
async def test_a_shared_chat_and_a_cascade_on_the_page(
    logical_database_url: str, tmp_path: Path
) -> None:
    node = node_binary()
    data_dir = tmp_path / "dev"
    async with dev_servers() as started:
        server = await start_handoff_dev(
            logical_database_url, data_dir, CASCADE_LIMIT="1", SCRIPTED_TOKEN_DELAY_MS="5"
        )
        started.append(server)
        # The second person signs in once, as the page does, so that the owner can add them
        async with httpx.AsyncClient(base_url=server.origin) as http:
            signed_in = await http.get("/api/dev/session", params={"as": MEMBER_EMAIL})
        assert signed_in.status_code == 200, signed_in.text
        member_id = uuid.UUID(signed_in.json()["userId"])
        member = {"userId": str(member_id), "email": MEMBER_EMAIL}
        report = await drive(node, server.origin, tmp_path, member)
        assert await server.stop() == 0
    print(json.dumps(report))
    assert report["problems"] == []

    shared = report["shared"]
    # An e-mail nobody has is refused in plain words; the member is added by theirs, in any case
    assert shared["refusedAdd"] == "Not added: Nobody with that e-mail has an account here."
    assert shared["ownerMembers"] == [
        [OWNER_EMAIL, "owner", None],
        [MEMBER_EMAIL, "member", "Remove"],
    ]
    # The member's page is theirs: their e-mail in the header and the tab's title
    assert shared["memberHeader"] == MEMBER_EMAIL
    assert shared["memberTitle"].endswith(f" · {MEMBER_EMAIL} · Handoff")
    # The member sees the chat in their list, marked, and who wrote what
    assert shared["markedShared"] == "shared with you"
    assert shared["ownerNamedForMember"] == OWNER_EMAIL
    assert shared["memberNamedForMember"] == "You"
    # The owner sees the member's message under the member's e-mail, their own under "You"
    assert shared["memberNamedForOwner"] == MEMBER_EMAIL
    assert shared["ownerNamedForOwner"] == "You"
    [sent] = await fetch(
        logical_database_url,
        "select sender_id from message where chat_id = %s and content = 'Hello from the member'",
        uuid.UUID(shared["chatId"]),
    )
    assert sent["sender_id"] == member_id
    # The member may not add anyone; they may leave, and the chat leaves their list
    assert not shared["addFormForMember"]
    assert shared["removeButtonsForMember"] == 0
    assert shared["afterLeaving"] != shared["chatId"]
    assert not await fetch(
        logical_database_url,
        "select 1 from chat_member where chat_id = %s and user_id = %s",
        uuid.UUID(shared["chatId"]),
        member_id,
    )

    cascade = report["cascade"]
    # The card: one more reply depends on the edit, one was regenerated
    assert cascade["cardText"] == "1 reply still depends on your edit. 1 regenerated so far."
    [row] = await fetch(
        logical_database_url,
        "select status, regenerated from cascade where id = %s",
        uuid.UUID(cascade["cascadeId"]),
    )
    assert row == {"status": "completed", "regenerated": 2}
    # At the card: the edited message and the replies replaced so far, each stale and linked to
    # what replaced it, as the database says
    at_card = cascade["staleAtCard"]
    stored = await replaced_by(logical_database_url, [s["id"] for s in at_card])
    assert all(s["link"] == stored[s["id"]] for s in at_card), (at_card, stored)
    assert [(s["role"], s["label"]) for s in at_card] == [
        ("user", "Edited"),
        ("assistant", "Stale"),
        ("assistant", "Stale"),
    ]
    assert at_card[0]["id"] == cascade["firstId"]
    # The link took the page to the replacement, marked
    assert cascade["highlighted"] == at_card[1]["link"]
    # After Continue: the last dependent too is stale and linked; every current reply completed
    after = cascade["staleAfter"]
    assert len(after) == len(at_card) + 1
    stored = await replaced_by(logical_database_url, [s["id"] for s in after])
    assert all(s["link"] == stored[s["id"]] and s["link"] for s in after), (after, stored)
    current = cascade["current"]
    assert {s["link"] for s in after} <= {c[0] for c in current}
    assert all(c[2] == "completed" for c in current if c[1] == "assistant"), current

    for shot in map(Path, (shared["screenshot"], cascade["screenshot"])):
        assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
