// Sending a message and reading its reply as one stream: the quick path's tokens, the handoff,
// the background's drafts, the end; the text shown is the stored reply's, none of it doubled.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { collect, makeClient, newChat, stored } from './support.mjs';

let ctx;
before(async () => {
  ctx = await makeClient();
});
after(() => ctx.close());

test('a reply without a tool: metadata, tokens, then finish with the stored content', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const { events, text, finish } = await collect(client.chat(chatId).send('Hello there'));
  assert.equal(events[0].type, 'metadata');
  const replyId = events[0].metadata.assistantMessageId;
  assert.ok(events.filter((e) => e.type === 'text').length >= 2, 'streamed in pieces');
  assert.equal(finish.type, 'finish');
  assert.equal(finish.message.status, 'completed');
  const row = await stored(client, chatId, replyId);
  assert.equal(row.status, 'completed');
  assert.equal(text, row.content);
  assert.equal(finish.message.text, row.content);
});

test('a tool turn: one stream across the handoff, drafts continuing the streamed text', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chat = client.chat(chatId);
  const { events, text, finish } = await collect(chat.send('/sleep 1'));
  const kinds = events.map((e) => e.type);
  const handoffAt = kinds.indexOf('handoff');
  assert.ok(handoffAt > 1, kinds.join(','));
  assert.ok(kinds.slice(0, handoffAt).includes('text'), 'tokens before the handoff');
  assert.ok(kinds.slice(handoffAt).includes('text'), 'text after the handoff');
  const progress = events.filter((e) => e.type === 'update').flatMap((e) => e.message.progress);
  assert.ok(progress.some((call) => call.name === 'sleep'), JSON.stringify(progress));
  assert.equal(finish.type, 'finish');
  assert.equal(finish.message.status, 'completed');
  const row = await stored(client, chatId, events[0].metadata.assistantMessageId);
  assert.equal(text, row.content, 'the deltas add up to the stored reply');
  assert.match(row.content, /sleep returned slept 1s/);
  // The chat's messages: the user's and the reply, as shown.
  const shown = chat.messages.map((m) => [m.role, m.text]);
  assert.deepEqual(shown, [
    ['user', '/sleep 1'],
    ['assistant', row.content],
  ]);
});

test('cancel ends a background reply canceled, keeping the text shown', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chat = client.chat(chatId);
  let canceled = null;
  const { finish, text } = await collect(chat.send('/sleep 5'), async (event) => {
    if (event.type === 'handoff' && !canceled) canceled = await chat.cancel();
  });
  assert.equal(canceled.canceled, true);
  assert.equal(finish.message.status, 'canceled');
  const row = await stored(client, chatId, finish.messageId);
  assert.equal(row.status, 'canceled');
  assert.equal(text, row.content);
});

test('an approval: the stream says what waits, approve lets it run to the end', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chat = client.chat(chatId);
  const decided = [];
  const { finish } = await collect(
    chat.send('/send_email {"to": "ada@example.com", "subject": "Minutes"}'),
    async (event) => {
      const pending = event.type === 'update' && event.message.pendingApproval;
      if (pending && event.message.status === 'awaiting_approval' && !decided.length) {
        decided.push(await chat.approve(pending.toolCallId, true));
      }
    },
  );
  assert.equal(decided[0].approved, true);
  assert.equal(finish.message.status, 'completed');
  assert.match(finish.message.text, /Email to ada@example.com sent/);
});

test('a question: answered through the client, the reply goes on with the answer', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chat = client.chat(chatId);
  const ask = '/ask_user {"question": "Which city?", "options": ["Berlin", "Lisbon"], "context": "trip"}';
  let answered = null;
  const { finish } = await collect(chat.send(ask), async (event) => {
    const pending = event.type === 'update' && event.message.pendingQuestion;
    if (pending && event.message.status === 'awaiting_input' && !answered) {
      assert.deepEqual(pending.options, ['Berlin', 'Lisbon']);
      answered = await chat.answer(pending.questionId, 'Lisbon');
    }
  });
  assert.equal(answered.answered, true);
  assert.match(finish.message.text, /The user answered: Lisbon/);
});

test('pause and resume with an instruction', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chat = client.chat(chatId);
  const seen = [];
  const { finish } = await collect(chat.send('/sleep 2'), async (event) => {
    if (event.type === 'update') seen.push(event.message.status);
    if (event.type === 'update' && event.message.progress.some((c) => c.name === 'sleep') && !seen.includes('asked')) {
      seen.push('asked');
      assert.equal((await chat.pause()).pausing, true);
    }
    if (event.type === 'update' && event.message.status === 'paused') {
      assert.equal((await chat.resume({ instruction: 'Answer in one line' })).resumed, true);
    }
  });
  assert.ok(seen.includes('paused'), seen.join(','));
  assert.equal(finish.message.status, 'completed');
  assert.match(finish.message.text, /Answer in one line/);
});

test('regenerate streams a new reply on a new branch; branches list and switch', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const chat = client.chat(chatId);
  const first = await collect(chat.send('Say something'));
  const firstId = first.events[0].metadata.assistantMessageId;
  const again = await collect(chat.regenerate(firstId));
  const secondId = again.events[0].metadata.assistantMessageId;
  assert.notEqual(secondId, firstId);
  assert.equal(again.finish.message.status, 'completed');
  const { branches, activeBranchId } = await client.branches(chatId);
  assert.deepEqual(branches.map((b) => b.id), ['main', secondId]);
  assert.equal(activeBranchId, secondId);
  await client.activateBranch(chatId, 'main');
  assert.equal((await client.branches(chatId)).activeBranchId, 'main');
});
