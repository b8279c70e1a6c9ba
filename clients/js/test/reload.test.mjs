// A page reloaded while a reply is being written, without Redis: a new client (nothing kept
// from the old one) finds the reply still running, shows it continuing from what was already
// written, and ends with the stored reply, no text doubled or missing; stop works on it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { collect, makeClient, newChat, stored } from './support.mjs';

const LONG = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');

let pages = [];
async function page() {
  const made = await makeClient();
  pages.push(made);
  return made.client;
}
before(() => {
  pages = [];
});
after(() => Promise.all(pages.map((p) => p.close())));

/** Sends `content` on a first page and leaves it (a reload) once `leaveAt` says so; the reply's
 * id and the text that page had shown. */
async function sendThenReload(content, leaveAt) {
  const first = await page();
  const chatId = await newChat(first);
  let replyId = null;
  let shown = '';
  for await (const event of first.chat(chatId).send(content)) {
    if (event.type === 'metadata') replyId = event.metadata.assistantMessageId;
    if (event.type === 'text') shown = event.text;
    if (leaveAt(event, shown)) break; // the page goes away: its request is dropped
  }
  await first.close();
  return { chatId, replyId, shown };
}

/** A reloaded page: what it finds running, and the reply followed from there. */
async function reloadAndFollow(chatId, replyId, onEvent) {
  const client = await page();
  const chat = client.chat(chatId);
  const running = await chat.running();
  assert.deepEqual(running.map((m) => m.id), [replyId], 'the reply is found still running');
  const foundText = running[0].text;
  const followed = await collect(chat.follow(replyId), (event) => onEvent?.(event, chat));
  return { client, chat, foundText, followed };
}

test('reloaded mid-quick-path: the reply continues from its draft to the stored end', async () => {
  const { chatId, replyId, shown } = await sendThenReload(LONG, (e, text) => e.type === 'text' && text.length > 40);
  const { client, chat, foundText, followed } = await reloadAndFollow(chatId, replyId);
  const row = await stored(client, chatId, replyId);
  assert.equal(row.status, 'completed');
  assert.ok(shown.length > 40 && row.content.startsWith(shown));
  // Found half-written (the quick path was still streaming), then continued.
  assert.ok(foundText.length > 0 && foundText.length < row.content.length, `${foundText.length} of ${row.content.length}`);
  const texts = followed.events.filter((e) => e.type === 'text');
  assert.ok(texts.length >= 2, 'it grew in several steps after the reload');
  assert.equal(followed.text, row.content, 'no text doubled or missing');
  assert.equal(followed.finish.message.status, 'completed');
  // What the page shows: the stored history, the reply's text its content.
  const history = await client.history(chatId);
  assert.deepEqual(
    chat.messages.map((m) => [m.id, m.text]),
    history.messages.map((m) => [m.id, m.content]),
  );
});

test('reloaded in the background: the reply continues across its tool to the stored end', async () => {
  const { chatId, replyId } = await sendThenReload('/sleep 2', (e) => e.type === 'handoff');
  const { client, chat, foundText, followed } = await reloadAndFollow(chatId, replyId);
  const row = await stored(client, chatId, replyId);
  assert.equal(row.status, 'completed');
  assert.match(row.content, /sleep returned slept 2s/);
  assert.ok(row.content.startsWith(foundText) && foundText.length < row.content.length);
  assert.equal(followed.text, row.content, 'no text doubled or missing');
  const history = await client.history(chatId);
  assert.deepEqual(
    chat.messages.map((m) => [m.id, m.text]),
    history.messages.map((m) => [m.id, m.content]),
  );
});

test('reloaded mid-quick-path, then stopped: the reply ends canceled with the text shown', async () => {
  const { chatId, replyId } = await sendThenReload(LONG, (e, text) => e.type === 'text' && text.length > 20);
  let stop = null;
  const { client, followed } = await reloadAndFollow(chatId, replyId, async (event, chat) => {
    if (event.type === 'text' && !stop) stop = await chat.cancel();
  });
  assert.equal(stop.canceled, true);
  assert.equal(followed.finish.message.status, 'canceled');
  const row = await stored(client, chatId, replyId);
  assert.equal(row.status, 'canceled');
  assert.ok(row.content.length < `You said: "${LONG}"`.length, 'stopped before the end');
  assert.equal(followed.finish.message.text, row.content);
});
