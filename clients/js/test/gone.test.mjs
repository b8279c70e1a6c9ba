// The server goes away while a reply is followed in the background: the stream ends with a
// typed HandoffError (`server_gone`) within the client's bound, not a hang. This file stops the
// server (HANDOFF_DEV_PID): the Python test runs it alone, last.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { HandoffError } from '../dist/index.js';
import { makeClient, newChat } from './support.mjs';

test('a followed reply ends with server_gone once the server is away', async () => {
  const ctx = await makeClient({ client: { serverGoneAfterMs: 3000, pollMs: 500 } });
  try {
    const chatId = await newChat(ctx.client);
    const events = [];
    let stoppedAt = 0;
    const following = (async () => {
      for await (const event of ctx.client.chat(chatId).send('/sleep 30')) {
        events.push(event.type);
        if (event.type === 'handoff') {
          stoppedAt = Date.now();
          process.kill(Number(process.env.HANDOFF_DEV_PID), 'SIGTERM');
        }
      }
    })();
    await assert.rejects(following, (error) => {
      assert.ok(error instanceof HandoffError, String(error));
      assert.equal(error.code, 'server_gone');
      assert.equal(error.status, 0);
      return true;
    });
    assert.ok(events.includes('handoff'), events.join(','));
    const took = Date.now() - stoppedAt;
    assert.ok(took < 10_000, `ended ${took} ms after the server stopped`);
  } finally {
    await ctx.close();
  }
});
