// Tokens: one refused by the API is refreshed through the client's function and the request
// sent again; one that expires while a reply is followed ends the Realtime channel, and the
// subscription comes back with a fresh one, the reply followed to its stored end.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collect, makeClient, mint, newChat, stored } from './support.mjs';

test('an expired token is refreshed through the function, once, and the route answers', async () => {
  const ctx = await makeClient({ token: mint(-60), fresh: () => mint(3600) });
  try {
    const chats = await ctx.client.chats();
    assert.ok(Array.isArray(chats));
    assert.deepEqual(ctx.tokens.calls, [false, true]);
  } finally {
    await ctx.close();
  }
});

test('a token expiring mid-reply: refreshed, resubscribed, nothing lost', async () => {
  const ctx = await makeClient({ token: mint(3), fresh: () => mint(3600) });
  try {
    const { client, tokens } = ctx;
    const chatId = await newChat(client);
    const chat = client.chat(chatId);
    await chat.ready();
    const statuses = [];
    chat.subscribe(() => {
      const { status } = chat.snapshot();
      if (statuses.at(-1) !== status) statuses.push(status);
    });
    const { text, finish } = await collect(chat.send('/sleep 4'));
    assert.ok(tokens.calls.includes(true), 'the token was refreshed');
    // The channel ended at the token's expiry and was joined again.
    assert.deepEqual(statuses.slice(0, 3), ['live', 'down', 'connecting'], statuses.join(','));
    assert.equal(statuses.at(-1), 'live');
    assert.equal(finish.message.status, 'completed');
    const row = await stored(client, chatId, finish.messageId);
    assert.equal(text, row.content, 'no text doubled or missing');
    assert.match(row.content, /slept 4s/);
  } finally {
    await ctx.close();
  }
});
