// An edit's cascade through the client: in a chat of two assistants, each reply hearing the one
// before, an edit of the first message regenerates CASCADE_LIMIT (1, on this server) replies,
// then its card waits in the chat's snapshot; approved through the client, the rest follow, and
// each replaced reply is stale with what replaced it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { collect, makeClient, until } from './support.mjs';

let ctx;
before(async () => {
  ctx = await makeClient();
});
after(() => ctx.close());

test('a cascade card waits in the snapshot, is approved through the client, and the rest follow', async () => {
  const { client } = ctx;
  const [one, two] = await client.assistants();
  assert.ok(two, 'the deployment has two assistants');
  const { id: chatId } = await client.createChat({ title: 'cascade', assistantIds: [one.id, two.id] });
  const chat = client.chat(chatId);
  await chat.ready();
  const started = await collect(chat.send(`@${one.id} start`));
  const firstId = started.events[0].metadata.userMessageId;
  // Each reply hears the one before: two's hears the first message, one's hears two's reply.
  const replies = [];
  for (const [n, who] of [[1, two], [2, one]]) {
    const { events, finish } = await collect(chat.send(`@${who.id} step ${n}`));
    assert.equal(finish.message.status, 'completed');
    replies.push(events[0].metadata.assistantMessageId);
  }

  const edited = await collect(chat.send(`@${one.id} start anew`, { editOf: firstId }));
  assert.equal(edited.finish.message.status, 'completed');
  const [card] = await until(chat, (s) => s.cascades.length && s.cascades);
  assert.deepEqual([card.editedMessageId, card.regenerated, card.remaining], [firstId, 1, 1]);
  // The first dependent is replaced: stale, out of the shown messages, naming its replacement.
  const firstReplaced = chat.message(replies[0]);
  assert.equal(firstReplaced.stale, true);
  assert.ok(firstReplaced.replacedBy);
  assert.ok(!chat.messages.some((m) => m.id === replies[0]));
  assert.equal(chat.message(replies[1]).replacedBy, null, 'the second waits for the card');

  const decided = await chat.decideCascade(card.id, true);
  assert.deepEqual(decided, { cascadeId: card.id, approved: true });
  assert.deepEqual(chat.snapshot().cascades, []);
  const second = await until(chat, () => chat.message(replies[1])?.replacedBy && chat.message(replies[1]));
  assert.equal(second.stale, true);
  const replacement = await until(chat, (s) => s.messages.find((m) => m.id === second.replacedBy && m.status === 'completed'));
  assert.equal(replacement.role, 'assistant');
  // A second answer to the card is refused, typed.
  await assert.rejects(chat.decideCascade(card.id, false), (error) => {
    assert.ok(['cascade_not_found', 'cascade_already_decided'].includes(error.code), error.code);
    return true;
  });
  const history = await client.history(chatId);
  assert.deepEqual(history.pendingCascades, []);
});
