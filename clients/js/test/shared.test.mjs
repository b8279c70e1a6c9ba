// Shared chats through the client: the owner adds and removes people, each refusal a typed
// HandoffError with the API's code; a message naming no assistant is posted, its stream ending
// with `posted` and no reply, and the other person's open chat shows it with its sender; a
// tool's approval is the turn starter's alone. (The server runs with MAX_MEMBERS_PER_CHAT 1.)

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { CLAIMS, clientAs, collect, makeClient, newChat, otherUsers, stored, until } from './support.mjs';

const NOBODY = '00000000-0000-4000-8000-0000000000aa';
let owner;
let first;
let second;
const [ada, bob] = otherUsers();

before(async () => {
  assert.ok(ada && bob, 'the Python test made two users');
  owner = await makeClient();
  first = await clientAs(ada);
  second = await clientAs(bob);
});
after(async () => {
  await Promise.all([owner, first, second].map((ctx) => ctx?.close()));
});

test('members: added by e-mail, listed, refused with typed codes, removed', async () => {
  const chatId = await newChat(owner.client);
  const added = await owner.client.addMember(chatId, { email: ada.email.toLowerCase() });
  assert.deepEqual([added.userId, added.email, added.role], [ada.id, ada.email, 'member']);
  assert.ok(!Number.isNaN(Date.parse(added.addedAt)));
  // Again: the same member, unchanged.
  assert.equal((await owner.client.addMember(chatId, { userId: ada.id })).addedAt, added.addedAt);
  const listed = await first.client.members(chatId);
  assert.deepEqual(listed.map((m) => [m.userId, m.role]), [[CLAIMS.sub, 'owner'], [ada.id, 'member']]);
  const shared = (await first.client.chats()).find((chat) => chat.id === chatId);
  assert.equal(shared.role, 'member');
  assert.equal((await owner.client.chats()).find((chat) => chat.id === chatId).role, 'owner');

  const refused = (status, code) => (error) => {
    assert.equal(error.name, 'HandoffError');
    assert.deepEqual([error.status, error.code], [status, code]);
    return true;
  };
  await assert.rejects(owner.client.addMember(chatId, { userId: bob.id }), refused(422, 'too_many_members'));
  await assert.rejects(owner.client.addMember(chatId, { userId: NOBODY }), refused(404, 'chat_or_user_not_found'));
  await assert.rejects(first.client.addMember(chatId, { userId: bob.id }), refused(404, 'chat_or_user_not_found'));
  await assert.rejects(first.client.removeMember(chatId, CLAIMS.sub), refused(403, 'not_chat_owner'));
  await assert.rejects(owner.client.removeMember(chatId, CLAIMS.sub), refused(409, 'owner_stays'));
  await assert.rejects(owner.client.removeMember(chatId, bob.id), refused(404, 'member_not_found'));
  await assert.rejects(second.client.history(chatId), refused(404, 'chat_not_found'));
  // Nothing of the refusals was stored.
  assert.equal((await owner.client.members(chatId)).length, 2);

  await owner.client.removeMember(chatId, ada.id);
  await assert.rejects(first.client.history(chatId), refused(404, 'chat_not_found'));
  assert.deepEqual((await owner.client.members(chatId)).map((m) => m.userId), [CLAIMS.sub]);
  // A member leaves by removing themself.
  await owner.client.addMember(chatId, { userId: bob.id });
  await second.client.removeMember(chatId, bob.id);
  assert.deepEqual((await owner.client.members(chatId)).map((m) => m.userId), [CLAIMS.sub]);
});

test('a posted message: the stream ends with `posted`, the other member sees it with its sender', async () => {
  const chatId = await newChat(owner.client);
  await owner.client.addMember(chatId, { userId: ada.id });
  const watching = owner.client.chat(chatId);
  await watching.ready();
  const { events, finish } = await collect(first.client.chat(chatId).send('Hello, both of you'));
  assert.deepEqual(events.map((e) => e.type), ['metadata', 'posted']);
  assert.equal(events[0].metadata.assistantId, null);
  assert.equal(events[0].metadata.assistantMessageId, null);
  const id = finish.messageId;
  assert.equal(id, events[0].metadata.userMessageId);
  assert.equal(finish.message.text, 'Hello, both of you');
  // The owner's open chat: the message, its sender, no assistant, and no reply.
  const seen = await until(watching, (s) => s.messages.find((m) => m.id === id && m.senderId === ada.id));
  assert.deepEqual([seen.role, seen.assistantId, seen.text], ['user', null, 'Hello, both of you']);
  assert.equal(watching.snapshot().status, 'live', 'followed over Realtime');
  const row = await stored(owner.client, chatId, id);
  assert.deepEqual([row.senderId, row.assistantId], [ada.id, null]);
  assert.deepEqual((await owner.client.history(chatId)).messages.map((m) => m.role), ['user']);
});

test("a member's tool turn: the owner sees its approval but only its starter decides", async () => {
  const chatId = await newChat(owner.client);
  await owner.client.addMember(chatId, { userId: ada.id });
  const mine = first.client.chat(chatId);
  const theirs = owner.client.chat(chatId);
  await theirs.ready();
  // Named, as a shared chat's message must be to be answered.
  const [helper] = await owner.client.chatAssistants(chatId);
  let refusal = null;
  const { finish } = await collect(
    mine.send('/send_email {"to": "ada@example.com", "subject": "Minutes"}', { assistantId: helper.id }),
    async (event) => {
      const pending = event.type === 'update' && event.message.pendingApproval;
      if (pending && event.message.status === 'awaiting_approval' && !refusal) {
        const shown = await until(theirs, (s) => s.messages.find((m) => m.pendingApproval));
        assert.equal(shown.pendingApproval.toolCallId, pending.toolCallId);
        refusal = await theirs.approve(pending.toolCallId, true).catch((error) => error);
        await mine.approve(pending.toolCallId, true);
      }
    },
  );
  assert.deepEqual([refusal.status, refusal.code], [403, 'not_turn_starter']);
  assert.equal(finish.message.status, 'completed');
  const user = (await owner.client.history(chatId)).messages.find((m) => m.role === 'user');
  assert.equal(user.senderId, ada.id);
});
