// The AI SDK transport, read by AI SDK's own readUIMessageStream (what useChat runs on): a
// message sent through it ends as the stored reply, and after a reload reconnectToStream finds
// the reply still being written and replays it to the same end.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { readUIMessageStream } from 'ai';

import { HandoffChatTransport } from '../dist/ai-sdk.js';
import { makeClient, newChat, stored } from './support.mjs';

const pages = [];
async function page() {
  const made = await makeClient();
  pages.push(made);
  return made.client;
}
after(() => Promise.all(pages.map((p) => p.close())));

const userMessage = (text) => ({ id: 'm1', role: 'user', parts: [{ type: 'text', text }] });
const textOf = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

async function last(stream, onMessage = () => {}) {
  let message = null;
  for await (const snapshot of readUIMessageStream({ stream })) {
    message = snapshot;
    await onMessage(snapshot);
  }
  return message;
}

let client;
before(async () => {
  client = await page();
});

test('useChat sending through the transport: the stored reply, with its state part', async () => {
  const chatId = await newChat(client);
  const transport = new HandoffChatTransport(client);
  const stream = await transport.sendMessages({
    trigger: 'submit-message',
    chatId,
    messageId: undefined,
    messages: [userMessage('/sleep 1')],
    abortSignal: undefined,
  });
  const message = await last(stream);
  const row = await stored(client, chatId, message.id);
  assert.equal(row.status, 'completed');
  assert.equal(textOf(message), row.content);
  const part = message.parts.find((p) => p.type === 'data-handoff');
  assert.equal(part.data.status, 'completed');
  assert.ok(part.data.progress.some((call) => call.status === 'completed'));
});

test('a reload: reconnectToStream replays the running reply to its stored end', async () => {
  const chatId = await newChat(client);
  const first = new HandoffChatTransport(client);
  const stream = await first.sendMessages({
    trigger: 'submit-message',
    chatId,
    messageId: undefined,
    messages: [userMessage('/sleep 2')],
    abortSignal: undefined,
  });
  // The page goes away once the reply is in the background.
  const reader = stream.getReader();
  for (;;) {
    const { value } = await reader.read();
    if (value?.type === 'data-handoff') break;
  }
  await reader.cancel();
  const reloaded = new HandoffChatTransport(await page());
  const resumed = await reloaded.reconnectToStream({ chatId });
  assert.ok(resumed, 'a running reply was found');
  const message = await last(resumed);
  const row = await stored(client, chatId, message.id);
  assert.equal(row.status, 'completed');
  assert.equal(textOf(message), row.content);
  assert.equal(await reloaded.reconnectToStream({ chatId }), null, 'nothing left to reconnect to');
});
