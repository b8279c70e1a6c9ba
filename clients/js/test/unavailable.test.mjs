// A database Realtime cannot follow (wal_level=replica: no logical decoding): the feed says so
// once, `unavailable` with the server's words, rejoins no more, and polls the history instead,
// so a reply is still seen to its stored end.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { collect, makeClient, newChat, sleep, stored, until } from './support.mjs';

const made = [];
after(() => Promise.all(made.map((m) => m.close())));

test('unfollowable: said once, with the reason, and the reply followed by polling', async () => {
  const m = await makeClient({ client: { pollMs: 300 } });
  made.push(m);
  const chatId = await newChat(m.client);
  const chat = m.client.chat(chatId);
  const statuses = [];
  chat.subscribe(() => {
    if (statuses.at(-1) !== chat.snapshot().status) statuses.push(chat.snapshot().status);
  });
  const snapshot = await until(chat, (s) => s.status === 'unavailable' && s);
  assert.match(snapshot.unavailable, /wal_level/);
  // No rejoin: it stays unavailable (a rejoin would pass through `connecting`).
  await sleep(2500);
  assert.equal(chat.snapshot().status, 'unavailable');
  assert.ok(!statuses.slice(statuses.indexOf('unavailable')).includes('connecting'), statuses.join(','));

  const sent = await collect(chat.send('/sleep 3'));
  const replyId = sent.events[0].metadata.assistantMessageId;
  assert.equal(sent.finish.type, 'finish');
  const row = await stored(m.client, chatId, replyId);
  assert.equal(sent.finish.message.status, row.status);
  const shown = await until(chat, (s) => s.messages.find((x) => x.id === replyId && x.status === row.status));
  assert.equal(shown.content, row.content);
});
