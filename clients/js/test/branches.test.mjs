// Every branch's history (`allBranches`): a chat opened so keeps the replies a regeneration
// replaced, stale and linked to their replacement, both live and after a reload; one opened
// without it shows the active branch alone.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { collect, makeClient, newChat, until } from './support.mjs';

const made = [];
after(() => Promise.all(made.map((m) => m.close())));

async function client() {
  const m = await makeClient();
  made.push(m);
  return m.client;
}

test('allBranches keeps a replaced reply, stale and linked, live and after a reload', async () => {
  const first = await client();
  const chatId = await newChat(first);
  const chat = first.chat(chatId, { allBranches: true });
  await chat.ready();
  const sent = await collect(chat.send('Say something'));
  const firstId = sent.events[0].metadata.assistantMessageId;
  const again = await collect(chat.regenerate(firstId));
  const secondId = again.events[0].metadata.assistantMessageId;
  // Live: the replaced reply stays in the snapshot, marked, with its replacement beside it.
  const replaced = await until(chat, (s) => s.messages.find((m) => m.id === firstId && m.replacedBy));
  assert.equal(replaced.stale, true);
  assert.equal(replaced.replacedBy, secondId);
  assert.ok(chat.snapshot().messages.some((m) => m.id === secondId && !m.stale));

  // A reload: the history of every branch brings it again; without the option it is left out.
  const reloaded = (await client()).chat(chatId, { allBranches: true });
  await reloaded.ready();
  const found = reloaded.snapshot().messages.find((m) => m.id === firstId);
  assert.deepEqual([found?.stale, found?.replacedBy], [true, secondId]);
  const active = (await client()).chat(chatId);
  await active.ready();
  const ids = active.snapshot().messages.map((m) => m.id);
  assert.ok(ids.includes(secondId) && !ids.includes(firstId), ids.join(','));
});
