// Drives the dev page's protocol client (devkit/dev_page/protocol/, on the JavaScript client's
// build in devkit/dev_page/client/) under node, with no page and no DOM: signs in, follows a
// chat live (the package's feed, on a model of this script's), sends a message and reads its stream, follows the
// reply to its end through Realtime, cancels a second turn, and renews a token the server
// refuses. Prints what it saw as one JSON line.
//
// usage: node protocol_client.mjs ORIGIN PAGE_DIR

import { readFileSync } from 'node:fs';
import vm from 'node:vm';

const [origin, pageDir] = process.argv.slice(2);
// supabase-js's browser build, as the page loads it: it defines the `supabase` global.
vm.runInThisContext(readFileSync(`${pageDir}/vendor/supabase.js`, 'utf8'));
const { DevConnection } = await import(`${pageDir}/protocol/session.js`);
const { readSse } = await import(`${pageDir}/client/index.js`);

const TIMEOUT_MS = 30000;
const report = { states: [], events: [], rows: {}, histories: 0, renewed: 0 };
const waiters = [];

function settle() {
  for (const waiter of [...waiters]) {
    if (waiter.test()) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }
}

function until(test, what) {
  if (test()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const waiter = { test, resolve };
    waiters.push(waiter);
    setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), TIMEOUT_MS);
  });
}

// What the feed keeps: each message's status and content, as the rows and the history say.
const model = {
  history(rows) {
    report.histories += 1;
    for (const row of rows) report.rows[row.id] = { status: row.status, content: row.content };
    settle();
  },
  row(row) {
    report.rows[row.id] = { status: row.status, content: row.content };
    settle();
    return null;
  },
  draft: () => null,
  get: () => undefined,
  list: () => [],
  cascades: [],
};

const listener = {
  changed() {},
  status(kind) {
    report.states.push(kind);
    settle();
  },
  failed(error) {
    report.failed = error.message;
  },
};

const uuid4 = () => crypto.randomUUID();

async function turn(client, chatId, content) {
  const body = { chatId, content, userMessageId: uuid4(), multitaskStrategy: 'reject' };
  const response = await client.respond(body);
  const events = [];
  let replyId = null;
  for await (const { event, data } of readSse(response.body)) {
    events.push(event);
    if (event === 'metadata') replyId = data.assistantMessageId;
  }
  return { events, replyId };
}

const connection = new DevConnection({
  origin,
  createClient: (...args) => globalThis.supabase.createClient(...args),
});
connection.addEventListener('token', () => {
  report.renewed += 1;
});
const client = connection.api;
const session = await connection.signIn();
const chat = await client.createChat();
const feed = client.feed(chat.id, model);
report.states.push(feed.status);
feed.listen(listener);
await until(() => report.states.includes('live') && report.histories > 0, 'the feed');

const first = await turn(client, chat.id, '/calc 2*21');
report.events = first.events;
report.replyId = first.replyId;
await until(() => report.rows[first.replyId]?.status === 'completed', 'the reply to complete');

const second = await turn(client, chat.id, '/sleep 20');
await until(() => report.rows[second.replyId]?.status === 'queued' ||
  report.rows[second.replyId]?.status === 'streaming', 'the second reply to run');
report.cancel = await client.cancel(chat.id);
report.secondId = second.replyId;
await until(() => report.rows[second.replyId]?.status === 'canceled', 'the cancel to show');

// A token the server does not take, as the package's client holds it (it keeps the last one it
// was given): renewed once, and the request goes through.
connection.api.http.current = Promise.resolve('not-a-token');
report.chats = (await client.chats()).map((known) => known.id);
report.history = (await client.history(chat.id)).messages.map((row) => row.role);
report.chatId = chat.id;
// Every branch's history, the members, and the routes' refusals as HandoffErrors with codes.
report.allHistory = (await client.history(chat.id, { all: true })).messages.length;
report.members = (await client.members(chat.id)).map((m) => [m.userId, m.role]);
report.userId = session.userId;
const refusal = async (request) => {
  try {
    await request();
    return null;
  } catch (error) {
    return [error.status, error.code];
  }
};
report.addNobody = await refusal(() => client.addMember(chat.id, { email: 'nobody@example.com' }));
report.ownerLeaves = await refusal(() => client.removeMember(chat.id, session.userId));
report.decideNone = await refusal(() => client.decideCascade(chat.id, uuid4(), true));
report.cancelNone = await refusal(() => client.cancelCascade(chat.id, uuid4()));

await feed.close();
await connection.supabase().realtime.disconnect();
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(0);
