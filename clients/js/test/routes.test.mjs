// The control and read routes, typed; refusals as HandoffErrors with the server's code; an
// unreachable server as a typed error; unknown stream events from a newer server skipped.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';

import { HandoffClient, HandoffError, completeMention, matchingAssistants, mentionAt } from '../dist/index.js';
import { collect, makeClient, newChat } from './support.mjs';

let ctx;
before(async () => {
  ctx = await makeClient();
});
after(() => ctx.close());

test('chats, assistants, history and usage answer typed values', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chats = await client.chats();
  assert.ok(chats.some((chat) => chat.id === chatId));
  const assistants = await client.assistants();
  assert.ok(assistants.length >= 1 && assistants.every((a) => a.id && a.name));
  const inChat = await client.chatAssistants(chatId);
  assert.equal(inChat.filter((a) => a.isDefault).length, 1);
  const history = await client.history(chatId);
  assert.deepEqual(history.messages, []);
  assert.equal(typeof (await client.usage()), 'object');
  await client.deleteChat(chatId);
  assert.ok(!(await client.chats()).some((chat) => chat.id === chatId));
});

test('refusals are HandoffErrors with the status and code the API documents', async () => {
  const { client } = ctx;
  const missing = '00000000-0000-4000-8000-000000000001';
  await assert.rejects(client.history(missing), (error) => {
    assert.ok(error instanceof HandoffError);
    assert.equal(error.status, 404);
    assert.equal(error.code, 'chat_not_found');
    return true;
  });
  const chatId = await newChat(client);
  await assert.rejects(collect(client.chat(chatId).send('   ')), { status: 422, code: 'invalid_request' });
  await assert.rejects(client.pause(chatId), { status: 409, code: 'nothing_running' });
  await assert.rejects(client.resume(chatId), { status: 409, code: 'not_paused' });
  assert.equal((await client.cancel(chatId)).canceled, false);
  // Nothing was stored by the refused message.
  assert.deepEqual((await client.history(chatId, { all: true })).messages, []);
});

test('a message to an assistant the chat does not have, then added', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const inChat = new Set((await client.chatAssistants(chatId)).map((a) => a.id));
  const other = (await client.assistants()).find((a) => !inChat.has(a.id));
  assert.ok(other, 'the deployment has an assistant the new chat does not');
  await assert.rejects(collect(client.chat(chatId).send('hi', { assistantId: other.id })), {
    status: 409,
    code: 'assistant_not_in_chat',
  });
  const after = await client.addChatAssistant(chatId, other.id);
  assert.ok(after.some((a) => a.id === other.id && !a.isDefault));
  const { events, finish } = await collect(client.chat(chatId).send('hi', { assistantId: other.id }));
  assert.equal(events[0].metadata.assistantId, other.id);
  assert.equal(finish.message.status, 'completed');
});

test('a server that cannot be reached is a typed network error', async () => {
  const client = new HandoffClient({ url: 'http://127.0.0.1:9', supabase: ctx.supabase, accessToken: () => 't' });
  await assert.rejects(client.chats(), { code: 'network', status: 0 });
});

test('events a newer server adds are skipped, not thrown', async () => {
  const ids = { chatId: 'c', threadId: 't', assistantId: 'a', userMessageId: 'u', assistantMessageId: 'r', runId: 'n' };
  const server = createServer((request, response) => {
    response.writeHead(200, { 'Content-Type': 'text/event-stream' });
    response.write(`event: metadata\ndata: ${JSON.stringify(ids)}\n\n`);
    response.write('event: reasoning\ndata: {"text": "hmm"}\n\n: keepalive\n\n');
    response.write('event: token\ndata: {"text": "Hel"}\n\nevent: token\ndata: {"text": "lo"}\n\n');
    response.write('event: citation\ndata: {"url": "x"}\n\n');
    response.end('event: done\ndata: {"assistantMessageId": "r", "status": "completed", "content": "Hello"}\n\n');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  const client = new HandoffClient({ url, supabase: ctx.supabase, accessToken: () => 't' });
  try {
    const { events, text, finish } = await collect(client.chat('c').send('hi'));
    assert.deepEqual(events.map((e) => e.type), ['metadata', 'text', 'text', 'finish']);
    assert.equal(text, 'Hello');
    assert.equal(finish.message.text, 'Hello');
  } finally {
    await client.close();
    server.close();
  }
});

test('mentions: the one typed at the caret, the matching assistants, the completion', () => {
  const assistants = [
    { id: 'default', name: 'Helper' },
    { id: 'research', name: 'Research Bot' },
  ];
  const text = 'Ask @bo';
  const mention = mentionAt(text, text.length);
  assert.deepEqual(mention, { start: 4, query: 'bo' });
  assert.deepEqual(matchingAssistants(assistants, mention.query).map((a) => a.id), ['research']);
  assert.deepEqual(completeMention(text, mention, text.length, assistants[1]), {
    text: 'Ask @research ',
    caret: 14,
  });
  assert.equal(mentionAt('mail a@b', 8), null);
});
