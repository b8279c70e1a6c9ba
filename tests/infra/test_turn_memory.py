"""A turn's in-memory saver hands its graph's first read the head as seeded, decoded already,
and reads as the library's saver reads after that (infra/store/turn_memory.py)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import ChannelVersions, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from agent.threads import ThreadId, thread_config
from infra.store.checkpoints import seed_memory
from infra.store.turn_memory import TurnMemory

THREAD = ThreadId("chat:assistant")


async def a_head() -> CheckpointTuple:
    """A head as a turn holds it: decoded, with a parent and a pending write, and a channel
    whose value is None."""
    source = InMemorySaver()
    parent = await source.aput(thread_config(THREAD), empty_checkpoint(), {"step": 0}, {})
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {
        "messages": [HumanMessage("hi", id="1"), AIMessage("yo", id="2")],
        "cut_short": None,
    }
    versions: ChannelVersions = {"messages": "1", "cut_short": "1"}
    checkpoint["channel_versions"] = dict(versions)
    stored = await source.aput(parent, checkpoint, {"step": 1, "source": "loop"}, versions)
    await source.aput_writes(stored, [("messages", [AIMessage("w", id="3")])], "task")
    found = await source.aget_tuple(stored)
    assert found is not None
    return found


async def seeded_both() -> tuple[CheckpointTuple, InMemorySaver, TurnMemory]:
    """A head, and the library's saver and a TurnMemory, each seeded with it."""
    found = await a_head()
    library, turn = InMemorySaver(), TurnMemory()
    await seed_memory(library, found)
    await seed_memory(turn, found)
    return found, library, turn


async def test_the_first_read_is_the_seeded_head_as_the_librarys_read_decodes_it() -> None:
    found, library, turn = await seeded_both()
    # WHEN the graph's run begins and reads the thread's latest checkpoint
    first = await turn.aget_tuple(thread_config(THREAD))
    expected = await library.aget_tuple(thread_config(THREAD))
    # THEN it reads what the library's saver would, made of the values it was seeded with
    assert first == expected
    assert first is not None
    seeded = found.checkpoint["channel_values"]["messages"]
    messages = first.checkpoint["channel_values"]["messages"]
    assert len(messages) == len(seeded)
    assert all(a is b for a, b in zip(messages, seeded, strict=True))
    # AND its dictionaries and lists are its own: the run may change them
    assert messages is not seeded
    assert first.checkpoint is not found.checkpoint
    assert first.checkpoint["channel_versions"] is not found.checkpoint["channel_versions"]
    assert first.metadata is not found.metadata
    # AND every later read decodes, sharing nothing with the run
    again = await turn.aget_tuple(thread_config(THREAD))
    assert again == expected
    assert again is not None
    assert again.checkpoint["channel_values"]["messages"][0] is not seeded[0]


async def test_a_write_before_the_first_read_leaves_it_to_decode() -> None:
    found = await a_head()
    turn = TurnMemory()
    await seed_memory(turn, found)
    # WHEN something is written before the graph reads
    at = thread_config(THREAD, checkpoint_id=found.checkpoint["id"])
    await turn.aput_writes(at, [("messages", [AIMessage("later", id="4")])], "other")
    # THEN the read is the library's, the write included
    read = await turn.aget_tuple(at)
    assert read is not None
    assert (
        read.checkpoint["channel_values"]["messages"]
        is not found.checkpoint["channel_values"]["messages"]
    )
    assert sorted(w[0] for w in read.pending_writes or []) == ["other", "task"]


async def test_the_head_is_stored_only_once_something_needs_it() -> None:
    found, library, turn = await seeded_both()
    # WHEN the graph's run begins on its head
    first = await turn.aget_tuple(thread_config(THREAD))
    assert first is not None
    # THEN nothing of it was encoded yet
    assert not turn.storage
    assert not turn.blobs
    assert not turn.writes
    # WHEN the run writes its next checkpoint, whose channels are still the head's
    after = empty_checkpoint()
    after["channel_values"] = first.checkpoint["channel_values"]
    after["channel_versions"] = dict(first.checkpoint["channel_versions"])
    for saver in (library, turn):
        await saver.aput(first.config, after, {"step": 2, "source": "loop"}, {})
    # THEN the saver holds what the library's holds: the head, with its pending write, and the
    # new checkpoint, which reads its channels from the head's blobs
    listed = [t async for t in turn.alist(thread_config(THREAD))]
    assert listed == [t async for t in library.alist(thread_config(THREAD))]
    assert [t.checkpoint["id"] for t in listed] == [after["id"], found.checkpoint["id"]]
    assert listed[0].checkpoint["channel_values"] == found.checkpoint["channel_values"]


async def test_a_listing_before_the_first_read_lists_the_head() -> None:
    _, library, turn = await seeded_both()
    listed = [t async for t in turn.alist(thread_config(THREAD))]
    assert listed == [t async for t in library.alist(thread_config(THREAD))]
    assert len(listed) == 1


async def test_a_seeded_value_is_encoded_only_when_its_version_is_read() -> None:
    found, library, turn = await seeded_both()
    first = await turn.aget_tuple(thread_config(THREAD))
    assert first is not None
    # WHEN the run writes its next checkpoint with a history of its own, the rest as it was
    after = empty_checkpoint()
    after["channel_values"] = {"messages": [*first.checkpoint["channel_values"]["messages"]]}
    after["channel_versions"] = {"messages": "2", "cut_short": "1"}
    for saver in (library, turn):
        await saver.aput(first.config, after, {"step": 2, "source": "loop"}, {"messages": "2"})
    latest = await turn.aget_tuple(thread_config(THREAD))
    assert latest == await library.aget_tuple(thread_config(THREAD))
    # THEN the seeded history was stored without being encoded: no read needed it (what was
    # read, the seeded None, was)
    assert set(turn.blobs) == {(THREAD, "", "messages", "2"), (THREAD, "", "cut_short", "1")}
    # WHEN the seeded checkpoint itself is read
    at = thread_config(THREAD, checkpoint_id=found.checkpoint["id"])
    seeded = await turn.aget_tuple(at)
    # THEN it reads as the library's does, decoded from its encoding, sharing nothing
    assert seeded == await library.aget_tuple(at)
    assert seeded is not None
    held = found.checkpoint["channel_values"]["messages"]
    assert seeded.checkpoint["channel_values"]["messages"][0] is not held[0]
    assert (THREAD, "", "messages", "1") in turn.blobs


async def test_a_write_under_a_seeded_key_replaces_the_seeded_value() -> None:
    _, library, turn = await seeded_both()
    first = await turn.aget_tuple(thread_config(THREAD))
    assert first is not None
    # WHEN a checkpoint is written with a value under the seeded version's key
    after = empty_checkpoint()
    after["channel_values"] = {"messages": [HumanMessage("other", id="9")]}
    after["channel_versions"] = {"messages": "1", "cut_short": "1"}
    for saver in (library, turn):
        await saver.aput(first.config, after, {"step": 2, "source": "loop"}, {"messages": "1"})
    # THEN reads get the value written, as from the library's saver, not the seeded one
    latest = await turn.aget_tuple(thread_config(THREAD))
    assert latest == await library.aget_tuple(thread_config(THREAD))
    assert latest is not None
    assert [m.content for m in latest.checkpoint["channel_values"]["messages"]] == ["other"]
