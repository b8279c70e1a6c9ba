// useHandoffChat rendered for real: react-dom in a DOM (happy-dom), against the real server.
// A click sends a message; the page shows the reply growing, then its final text; a click on
// Stop cancels the next one, which ends canceled with the text it had.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Window } from 'happy-dom';

import { makeClient, newChat, sleep, stored } from './support.mjs';

const window = new Window({ url: 'http://localhost/' });
globalThis.window = window;
globalThis.document = window.document;
// Node 20 has no navigator, which react-dom reads (Node 21+ has one: left as it is).
if (!('navigator' in globalThis)) globalThis.navigator = window.navigator;

const { createElement: h } = await import('react');
const { createRoot } = await import('react-dom/client');
const { useHandoffChat } = await import('../dist/react.js');

/** The page: the messages (role, status, text), the hook's status, a Send and a Stop button. */
function Page({ client, chatId, draft }) {
  const chat = useHandoffChat(client, chatId);
  return h(
    'main',
    null,
    h('p', { id: 'status', 'data-feed': chat.feed }, chat.status),
    h(
      'ol',
      { id: 'messages' },
      chat.messages.map((m) => h('li', { key: m.id, 'data-role': m.role, 'data-status': m.status }, m.text)),
    ),
    h('button', { id: 'send', onClick: () => void chat.send(draft.text) }, 'Send'),
    h('button', { id: 'stop', onClick: () => void chat.stop() }, 'Stop'),
  );
}

const $ = (selector) => document.querySelector(selector);
const replies = () => [...document.querySelectorAll('li[data-role="assistant"]')];

/** Waits for `probe()` to be truthy, checking the DOM every 15 ms; `seen` gets each value. */
async function waitFor(probe, what, ms = 20_000, seen = () => {}) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    seen();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not shown within ${ms} ms:\n${document.body.innerHTML}`);
    await sleep(15);
  }
}

let ctx;
let root;
before(async () => {
  ctx = await makeClient();
});
after(async () => {
  root?.unmount();
  await ctx.close();
  await window.happyDOM.close();
});

test('the hook shows a reply growing, then its final text; Stop cancels the next', async () => {
  const { client } = ctx;
  const chatId = await newChat(client);
  const draft = { text: '/sleep 1' };
  const container = document.createElement('div');
  document.body.appendChild(container);
  root = createRoot(container);
  root.render(h(Page, { client, chatId, draft }));
  await waitFor(() => $('#status')?.getAttribute('data-feed') === 'live', 'the feed live');
  assert.equal($('#status').textContent, 'ready');

  $('#send').click();
  const texts = new Set();
  const statuses = new Set();
  const record = () => {
    const [reply] = replies();
    if (!reply) return;
    texts.add(reply.textContent);
    statuses.add(`${reply.getAttribute('data-status')}/${$('#status').textContent}`);
  };
  const done = await waitFor(
    () => replies().find((li) => li.getAttribute('data-status') === 'completed'),
    'the final reply',
    20_000,
    record,
  );
  const replyId = (await client.history(chatId)).messages.find((m) => m.role === 'assistant').id;
  const row = await stored(client, chatId, replyId);
  assert.equal(done.textContent, row.content, 'the final text is the stored reply');
  assert.match(row.content, /sleep returned slept 1s/);
  assert.ok(statuses.has('streaming/streaming'), [...statuses].join(' '));
  const partial = [...texts].filter((text) => text && text !== row.content);
  assert.ok(partial.length >= 2, `the reply grew in view: ${JSON.stringify([...texts])}`);
  assert.ok(partial.every((text) => row.content.startsWith(text)), 'each text shown a beginning of the last');
  assert.equal(document.querySelector('li[data-role="user"]').textContent, '/sleep 1');
  await waitFor(() => $('#status').textContent === 'ready', 'ready again');

  draft.text = '/sleep 8';
  $('#send').click();
  await waitFor(() => replies().length === 2 && $('#status').textContent === 'streaming', 'the second reply running');
  await waitFor(() => replies()[1].textContent, 'its first text');
  $('#stop').click();
  const canceled = await waitFor(
    () => replies()[1].getAttribute('data-status') === 'canceled' && replies()[1],
    'the canceled reply',
  );
  const [, second] = (await client.history(chatId)).messages.filter((m) => m.role === 'assistant');
  assert.equal(second.status, 'canceled');
  assert.equal(canceled.textContent, second.content);
  await waitFor(() => $('#status').textContent === 'ready', 'ready after the stop');
});
