// Drives the development chat page in a real Chromium, as a person would, and prints a JSON
// report of what the page showed and when.
//
//   node tests/browser/chat_page.mjs <origin> <output dir> <playwright-core dir>
//
// Debian's Chromium runs the page; playwright-core only drives it (it never downloads a browser).
// Times in the report are milliseconds since the key press or click that sent the message.
//
// To restart the server under the page, it asks whoever runs it: it prints `STOP` (then
// `START`) on a line of its own and waits for a line on its stdin saying it is done. The report
// is the last line.

import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const [origin, outDir, playwrightDir] = process.argv.slice(2);
if (!origin || !outDir || !playwrightDir) {
  console.error('usage: chat_page.mjs <origin> <output dir> <playwright-core dir>');
  process.exit(2);
}
const { chromium } = createRequire(import.meta.url)(playwrightDir);

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 20_000;

const runner = createInterface({ input: process.stdin });
const answers = runner[Symbol.asyncIterator]();

// Asks the test runner to do `what` to the server; returns once it has.
async function ask(what) {
  process.stdout.write(`${what}\n`);
  const { value, done } = await answers.next();
  if (done || value.trim() !== 'done') throw new Error(`${what}: the runner answered ${value}`);
}

// Runs in the page before its scripts: every change to an assistant bubble becomes a timeline
// entry (coalesced to one per task), with the page's own clock.
function recordTimeline() {
  const timeline = [];
  const last = new Map();
  window.__timeline = timeline;
  // Requests for a session (a token for the demo user), and for a chat's history (when).
  window.__sessions = 0;
  window.__historyLoads = [];
  // Requests to the SSE change route, which the page must not use any more.
  window.__sseRequests = 0;
  const fetch = window.fetch.bind(window);
  window.fetch = (input, init = {}) => {
    const url = String(input);
    if (url.endsWith('/api/dev/session')) window.__sessions += 1;
    if (/\/history(\?|$)/.test(url)) window.__historyLoads.push(performance.now());
    if (url.endsWith('/changes')) window.__sseRequests += 1;
    return fetch(input, init);
  };
  // The Realtime traffic, read off the page's websockets (supabase-js's V2 frames,
  // `[join_ref, ref, topic, event, payload]`): the sockets opened, the chat channels joined and
  // still joined (a chat switch must leave exactly one), those joined as public channels, and,
  // when `window.__dropDraft` is set, one `message_draft` change with a seq of at least that,
  // dropped as a lost frame would be.
  window.__sockets = [];
  window.__feeds = { opened: 0, open: 0 };
  window.__publicJoins = 0;
  window.__dropDraft = null;
  window.__dropped = [];
  // Each open socket's joined chat topics.
  const joined = new Set();
  const count = () => {
    window.__feeds.open = [...joined].reduce((sum, topics) => sum + topics.size, 0);
  };
  const Native = window.WebSocket;
  class WatchedSocket extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      window.__sockets.push(String(url));
      const mine = new Set();
      this.__joined = mine;
      joined.add(mine);
      this.addEventListener('close', () => {
        joined.delete(mine);
        count();
      });
    }

    send(data) {
      if (typeof data === 'string') {
        try {
          const [, , topic, event, payload] = JSON.parse(data);
          if (topic.startsWith('realtime:chat:') && event === 'phx_join') {
            window.__feeds.opened += 1;
            if (payload?.config?.private !== true) window.__publicJoins += 1;
            this.__joined.add(topic);
          } else if (topic.startsWith('realtime:chat:') && event === 'phx_leave') {
            this.__joined.delete(topic);
          }
          count();
        } catch {
          // not a JSON frame
        }
      }
      return super.send(data);
    }

    set onmessage(handler) {
      super.onmessage =
        handler &&
        ((event) => {
          if (typeof event.data === 'string' && window.__dropDraft !== null) {
            try {
              const [, , , name, payload] = JSON.parse(event.data);
              const row = payload?.data?.record;
              if (
                name === 'postgres_changes' &&
                payload.data.table === 'message_draft' &&
                row.seq >= window.__dropDraft
              ) {
                window.__dropDraft = null;
                window.__dropped.push({ seq: row.seq, at: performance.now(), id: row.message_id });
                return;
              }
            } catch {
              // not a JSON frame
            }
          }
          handler.call(this, event);
        });
    }

    get onmessage() {
      return super.onmessage;
    }
  }
  window.WebSocket = WatchedSocket;
  const visible = (node) => Boolean(node) && !node.hidden && node.getClientRects().length > 0;
  const snapshot = () => {
    const at = performance.now();
    for (const node of document.querySelectorAll('[data-testid="message"][data-role="assistant"]')) {
      const id = node.dataset.messageId;
      const text = node.querySelector('[data-testid="message-text"]')?.textContent ?? '';
      const entry = {
        id,
        status: node.dataset.status,
        phase: node.dataset.phase,
        length: text.length,
        text,
        indicator: visible(node.querySelector('[data-testid="handoff-indicator"]')),
        label: visible(node.querySelector('[data-testid="message-label"]'))
          ? node.querySelector('[data-testid="message-label"]').textContent
          : '',
        chips: [...node.querySelectorAll('[data-testid="progress-chip"]')].map(
          (chip) => `${chip.querySelector('.chip-name')?.textContent}:${chip.dataset.status}`,
        ),
        approval: visible(node.querySelector('[data-testid="approval"]')),
      };
      const key = JSON.stringify({ ...entry, id: undefined });
      if (last.get(id) === key) continue;
      last.set(id, key);
      timeline.push({ at, ...entry });
    }
  };
  let queued = false;
  const observer = new MutationObserver(() => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      snapshot();
    });
  });
  const start = () =>
    observer.observe(document.documentElement, {
      subtree: true,
      childList: true,
      characterData: true,
      attributes: true,
    });
  if (document.documentElement) start();
  else document.addEventListener('readystatechange', start, { once: true });
}

const round = (ms) => Math.round(ms);

// The id of the last reply shown once it is none of `previous` (an id, or a list of them).
async function lastAssistantId(page, previous) {
  const handle = await page.waitForFunction(
    (known) => {
      const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      const id = nodes.length ? nodes[nodes.length - 1].dataset.messageId : null;
      return id && !known.includes(id) ? id : null;
    },
    [previous].flat(),
    { timeout: STEP_TIMEOUT_MS },
  );
  return handle.jsonValue();
}

// Every reply shown now.
async function assistantIds(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('[data-testid="message"][data-role="assistant"]')].map(
      (node) => node.dataset.messageId,
    ),
  );
}

async function waitForStatus(page, id, status) {
  await page.waitForSelector(
    `[data-testid="message"][data-message-id="${id}"][data-status="${status}"]`,
    { timeout: STEP_TIMEOUT_MS },
  );
}

async function timelineOf(page, id, t0) {
  const entries = await page.evaluate(
    (messageId) => window.__timeline.filter((entry) => entry.id === messageId),
    id,
  );
  return entries.map((entry) => ({ ...entry, at: round(entry.at - t0) }));
}

// Counts distinct, strictly increasing text lengths among entries.
function growth(entries) {
  const lengths = [];
  for (const entry of entries) {
    if (!lengths.length || entry.length > lengths[lengths.length - 1]) lengths.push(entry.length);
  }
  return lengths;
}

async function bubble(page, id) {
  const node = page.locator(`[data-testid="message"][data-message-id="${id}"]`);
  return {
    status: await node.getAttribute('data-status'),
    text: await node.getByTestId('message-text').textContent(),
    label: (await node.getByTestId('message-label').isVisible())
      ? await node.getByTestId('message-label').textContent()
      : '',
    indicatorVisible: await node.getByTestId('handoff-indicator').isVisible(),
  };
}

async function sendWithKeyboard(page, lines) {
  const input = page.getByTestId('composer-input');
  await input.click();
  for (const [i, line] of lines.entries()) {
    if (i) await page.keyboard.press('Shift+Enter');
    await page.keyboard.type(line);
  }
  const t0 = await page.evaluate(() => performance.now());
  await page.keyboard.press('Enter');
  return t0;
}

async function sendWithClick(page, text) {
  await page.getByTestId('composer-input').fill(text);
  const t0 = await page.evaluate(() => performance.now());
  await page.getByTestId('send').click();
  return t0;
}

// 1) A turn that hands off: quick-path tokens, then the background draft, then the final text.
async function handoffTurn(page, outDir) {
  const lines = ['/sleep 2', 'What is the weather like?'];
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes.length ? nodes[nodes.length - 1].dataset.messageId : null;
  });
  const t0 = await sendWithKeyboard(page, lines);
  const userBubbleShown = await page
    .locator('[data-testid="message"][data-role="user"]')
    .last()
    .getByTestId('message-text')
    .textContent();
  const inputAfterSend = await page.getByTestId('composer-input').inputValue();
  const id = await lastAssistantId(page, before);
  const indicator = page.locator(
    `[data-testid="message"][data-message-id="${id}"] [data-testid="handoff-indicator"]`,
  );
  await indicator.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  const cancelEnabledInBackground = await page.getByTestId('cancel').isEnabled();
  // The moment of the handoff: the tool runs, the chips show it.
  await page
    .locator(`[data-testid="message"][data-message-id="${id}"] [data-testid="progress-chip"]`)
    .first()
    .waitFor({ timeout: STEP_TIMEOUT_MS });
  const backgroundShot = join(outDir, 'chat_page_background.png');
  await page.screenshot({ path: backgroundShot, fullPage: true });
  await waitForStatus(page, id, 'completed');
  await indicator.waitFor({ state: 'hidden', timeout: STEP_TIMEOUT_MS });
  const entries = await timelineOf(page, id, t0);
  const firstText = entries.find((entry) => entry.length > 0);
  const firstIndicator = entries.find((entry) => entry.indicator);
  const quick = entries.filter((entry) => entry.phase === 'quick');
  const withIndicator = entries.filter((entry) => entry.indicator);
  const completed = entries.find((entry) => entry.status === 'completed' && !entry.indicator);
  const shown = await bubble(page, id);
  // The bubble shown at once is the stored message now, and there is one of it.
  const userBubbles = await page.evaluate((text) => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="user"]');
    return [...nodes]
      .filter((node) => node.querySelector('[data-testid="message-text"]').textContent === text)
      .map((node) => node.dataset.messageId);
  }, lines.join('\n'));
  return {
    sent: lines.join('\n'),
    userBubbleShown,
    userBubbles,
    inputClearedOnSend: inputAfterSend === '',
    assistantMessageId: id,
    firstTokenMs: firstText ? firstText.at : null,
    indicatorShownMs: firstIndicator ? firstIndicator.at : null,
    completedMs: completed ? completed.at : null,
    tokensBeforeIndicator: Boolean(
      firstText && firstIndicator && firstText.at < firstIndicator.at && firstText.phase === 'quick',
    ),
    quickPathLengths: growth(quick),
    textAtHandoff: firstIndicator ? firstIndicator.text : null,
    draftLengthsWhileIndicator: growth(withIndicator),
    draftTimesWhileIndicator: withIndicator
      .filter((entry, i, all) => i === 0 || entry.length > all[i - 1].length)
      .map((entry) => entry.at),
    chipsSeen: [...new Set(entries.flatMap((entry) => entry.chips))],
    cancelEnabledInBackground,
    cancelEnabledAfter: await page.getByTestId('cancel').isEnabled(),
    final: shown,
    backgroundScreenshot: backgroundShot,
    timeline: entries.map(({ text, ...rest }) => rest),
  };
}

// 2) Cancel a turn in the background; meanwhile a second message is refused (409) and stays
// in the box.
async function canceledTurn(page) {
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes[nodes.length - 1].dataset.messageId;
  });
  const t0 = await sendWithClick(page, '/sleep 6');
  const id = await lastAssistantId(page, before);
  await page
    .locator(`[data-testid="message"][data-message-id="${id}"] [data-testid="handoff-indicator"]`)
    .waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });

  const refusedText = 'Are you still there?';
  await page.getByTestId('composer-input').fill(refusedText);
  await page.getByTestId('send').click();
  const composerError = page.getByTestId('composer-error');
  await composerError.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  const refused = {
    error: await composerError.textContent(),
    keptInBox: await page.getByTestId('composer-input').inputValue(),
    userBubbles: await page
      .locator('[data-testid="message"][data-role="user"] [data-testid="message-text"]')
      .allTextContents(),
  };
  await page.getByTestId('composer-input').fill('');

  const clickedAt = round((await page.evaluate(() => performance.now())) - t0);
  await page.getByTestId('cancel').click();
  await waitForStatus(page, id, 'canceled');
  const entries = await timelineOf(page, id, t0);
  const canceled = entries.find((entry) => entry.status === 'canceled');
  return {
    assistantMessageId: id,
    cancelClickedMs: clickedAt,
    canceledShownMs: canceled ? canceled.at : null,
    refusedWhileRunning: {
      ...refused,
      refusedTextInBubbles: refused.userBubbles.includes(refusedText),
      userBubbles: undefined,
    },
    final: await bubble(page, id),
    cancelEnabledAfter: await page.getByTestId('cancel').isEnabled(),
  };
}

// 3) A tool that needs approval: the card, a click on Approve, the card gone, the turn done.
async function approvedTurn(page) {
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes[nodes.length - 1].dataset.messageId;
  });
  // The subject hides a right-to-left override (typed as a JSON escape, which the model reads).
  await sendWithClick(
    page,
    '/send_email {"to": "ada@example.com", "subject": "Minutes \\u202etxt.exe"}',
  );
  const id = await lastAssistantId(page, before);
  const card = page.locator(`[data-testid="message"][data-message-id="${id}"] [data-testid="approval"]`);
  await card.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  const tool = await card.getByTestId('approval-tool').textContent();
  const argsText = await card.getByTestId('approval-args').textContent();
  const args = JSON.parse(argsText);
  await card.getByTestId('approval-note').fill('Looks right');
  await card.getByTestId('approve').click();
  await card.waitFor({ state: 'detached', timeout: STEP_TIMEOUT_MS });
  await waitForStatus(page, id, 'completed');
  return { assistantMessageId: id, tool, args, argsText, final: await bubble(page, id) };
}

// 4) A reload while the job runs: the page rebuilds from history and keeps following the job.
async function reloadedTurn(page) {
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes[nodes.length - 1].dataset.messageId;
  });
  await sendWithClick(page, '/sleep 2');
  const id = await lastAssistantId(page, before);
  const selector = `[data-testid="message"][data-message-id="${id}"]`;
  await page.locator(`${selector} [data-testid="handoff-indicator"]`).waitFor({
    state: 'visible',
    timeout: STEP_TIMEOUT_MS,
  });
  await page.reload();
  await page.waitForSelector('[data-testid="feed-status"][data-state="live"]', {
    timeout: STEP_TIMEOUT_MS,
  });
  await page.locator(selector).waitFor({ timeout: STEP_TIMEOUT_MS });
  const afterReload = await bubble(page, id);
  const t0 = await page.evaluate(() => performance.now());
  await waitForStatus(page, id, 'completed');
  const entries = await timelineOf(page, id, t0);
  return {
    assistantMessageId: id,
    afterReload,
    lengthsAfterReload: growth(entries),
    final: await bubble(page, id),
    messagesShown: await page.locator('[data-testid="message"]').count(),
  };
}

// 4b) A draft change lost on the way (the driver drops its frame): the next draft's seq skips
// one, and the page catches up from the history, then follows the job to its end.
async function draftGap(page) {
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes[nodes.length - 1].dataset.messageId;
  });
  const historyBefore = await page.evaluate(() => window.__historyLoads.length);
  // Drafts from the third on: the page has seen one of this reply's before the lost one.
  await page.evaluate(() => {
    window.__dropDraft = 3;
  });
  const t0 = await sendWithClick(page, '/sleep 2');
  const id = await lastAssistantId(page, before);
  await waitForStatus(page, id, 'completed');
  const facts = await page.evaluate(
    ([count, start]) => ({
      dropped: window.__dropped.map((d) => ({ ...d, at: Math.round(d.at - start) })),
      historyLoads: window.__historyLoads.slice(count).map((at) => Math.round(at - start)),
      stillArmed: window.__dropDraft !== null,
    }),
    [historyBefore, t0],
  );
  await page.evaluate(() => {
    window.__dropDraft = null;
  });
  const entries = await timelineOf(page, id, t0);
  const completed = entries.find((entry) => entry.status === 'completed');
  return {
    assistantMessageId: id,
    ...facts,
    lengths: growth(entries),
    completedMs: completed ? completed.at : null,
    final: await bubble(page, id),
  };
}

// 5) A tool turn's timeline: the reply's Timeline button opens a waterfall of its trace (one row
// per span, indented by depth, a bar placed and sized by time, the time taken) and its usage.
async function timelineOfTurn(page, outDir) {
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes[nodes.length - 1].dataset.messageId;
  });
  await sendWithClick(page, '/calc 2*21');
  const id = await lastAssistantId(page, before);
  await waitForStatus(page, id, 'completed');
  const reply = page.locator(`[data-testid="message"][data-message-id="${id}"]`);
  const toggle = reply.getByTestId('timeline-toggle');
  const panel = reply.getByTestId('timeline-panel');
  const closedBefore = {
    expanded: await toggle.getAttribute('aria-expanded'),
    panelVisible: await panel.isVisible(),
  };
  await toggle.click();
  // Done: every span of the turn has ended (a reply completes inside its finalize step).
  await reply
    .locator('[data-testid="timeline-panel"][data-state="done"]')
    .waitFor({ timeout: STEP_TIMEOUT_MS });
  const shot = join(outDir, 'chat_page_timeline.png');
  await page.mouse.move(0, 0); // no row highlighted under the pointer
  await panel.screenshot({ path: shot });
  const rows = await reply.locator('[data-testid="span-row"]').evaluateAll((nodes) =>
    nodes.map((row) => {
      const bar = row.querySelector('[data-testid="span-bar"]');
      const track = bar.parentElement.getBoundingClientRect();
      const box = bar.getBoundingClientRect();
      const name = row.querySelector('[data-testid="span-name"]');
      return {
        name: name.textContent,
        depth: Number(row.dataset.depth),
        indentPx: Math.round(name.getBoundingClientRect().left - row.getBoundingClientRect().left),
        marks: [...row.querySelectorAll('[data-testid="span-mark"]')].map((m) => m.textContent),
        took: row.querySelector('[data-testid="span-took"]').textContent,
        // What a screen reader or a copy of the table reads, cell by cell.
        cells: [...row.cells].map((cell) => cell.textContent.replace(/\s+/g, ' ').trim()),
        bar: {
          leftPx: Math.round((box.left - track.left) * 10) / 10,
          widthPx: Math.round(box.width * 10) / 10,
          trackPx: Math.round(track.width * 10) / 10,
        },
      };
    }),
  );
  const opened = {
    expanded: await toggle.getAttribute('aria-expanded'),
    controls: await toggle.getAttribute('aria-controls'),
    panelId: await panel.getAttribute('id'),
    usage: await reply.getByTestId('timeline-usage').textContent(),
    summary: await reply.getByTestId('timeline-summary').textContent(),
    headers: await reply.locator('[data-testid="waterfall"] thead th').allTextContents(),
  };
  await toggle.click();
  const closed = {
    expanded: await toggle.getAttribute('aria-expanded'),
    panelVisible: await panel.isVisible(),
  };
  return { assistantMessageId: id, closedBefore, opened, rows, closed, screenshot: shot };
}

// 6) The server stops while a job runs, and starts again with a new secret: the page says it
// lost the server, gets a new token once, rejoins the change feed by itself and shows the job
// (resumed by the new server) to its end; the next message goes through.
async function restartedServer(page, problems) {
  const before = await page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes[nodes.length - 1].dataset.messageId;
  });
  await sendWithClick(page, '/sleep 3');
  const id = await lastAssistantId(page, before);
  await page
    .locator(`[data-testid="message"][data-message-id="${id}"] [data-testid="progress-chip"]`)
    .first()
    .waitFor({ timeout: STEP_TIMEOUT_MS });
  const sessionsBefore = await page.evaluate(() => window.__sessions);
  const problemsBefore = problems.length;

  await ask('STOP');
  await page.waitForSelector('[data-testid="feed-status"][data-state="down"]', {
    timeout: STEP_TIMEOUT_MS,
  });
  const whileDown = {
    feed: await page.getByTestId('feed-status').textContent(),
    banner: await page.getByTestId('error-banner').textContent(),
  };
  await ask('START');
  await page.waitForSelector('[data-testid="feed-status"][data-state="live"]', {
    timeout: STEP_TIMEOUT_MS,
  });
  await waitForStatus(page, id, 'completed');
  const resumed = await bubble(page, id);

  const t0 = await sendWithClick(page, 'Welcome back');
  const next = await lastAssistantId(page, id);
  await waitForStatus(page, next, 'completed');
  // While the server was away, its requests failed, as they should: not problems of the page.
  // (supabase-js's socket too: refused while the server is away, then, until the page has the
  // new server's key, answered 401, which Chromium words in one of two ways depending on when
  // the socket's handshake fails.)
  const expected = /ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET|ERR_INCOMPLETE_CHUNKED_ENCODING|status of (401|503)|Unexpected response code: 401|HTTP Authentication failed; no valid credentials available|WebSocket is closed before the connection is established/;
  const during = problems.splice(problemsBefore);
  problems.push(...during.filter((text) => !expected.test(text)));
  return {
    assistantMessageId: id,
    whileDown,
    resumed,
    sessionRequests: (await page.evaluate(() => window.__sessions)) - sessionsBefore,
    bannerAfter: (await page.getByTestId('error-banner').isVisible())
      ? await page.getByTestId('error-banner').textContent()
      : '',
    nextMessageId: next,
    next: await bubble(page, next),
    nextCompletedMs: round((await page.evaluate(() => performance.now())) - t0),
  };
}

// 7) A new chat, then back: the address follows, the old feed is closed.
async function switchedChats(page) {
  const demoHash = await page.evaluate(() => window.location.hash);
  const demoMessages = await page.locator('[data-testid="message"]').count();
  await page.getByTestId('new-chat').click();
  await page.waitForFunction((hash) => window.location.hash !== hash, demoHash, {
    timeout: STEP_TIMEOUT_MS,
  });
  await page.waitForSelector('[data-testid="feed-status"][data-state="live"]', {
    timeout: STEP_TIMEOUT_MS,
  });
  await page.getByTestId('empty').waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  const fresh = {
    hash: await page.evaluate(() => window.location.hash),
    title: await page.getByTestId('chat-title').textContent(),
    messages: await page.locator('[data-testid="message"]').count(),
    chats: await page.getByTestId('chat-item').count(),
    feeds: await page.evaluate(() => ({ ...window.__feeds })),
  };
  await page.locator(`[data-testid="chat-item"][href="${demoHash}"]`).click();
  await page.waitForFunction(
    (count) => document.querySelectorAll('[data-testid="message"]').length === count,
    demoMessages,
    { timeout: STEP_TIMEOUT_MS },
  );
  await page.waitForSelector('[data-testid="feed-status"][data-state="live"]', {
    timeout: STEP_TIMEOUT_MS,
  });
  return {
    fresh,
    back: {
      hash: await page.evaluate(() => window.location.hash),
      messages: await page.locator('[data-testid="message"]').count(),
      feeds: await page.evaluate(() => ({ ...window.__feeds })),
    },
    demoHash,
    demoMessages,
  };
}

// What the chat's history endpoint says for a branch (the active one without `branchId`): the
// ids of its user and assistant messages, as the page should show them.
async function historyIds(page, branchId) {
  return page.evaluate(async (branch) => {
    const session = await (await fetch('/api/dev/session')).json();
    const query = branch ? `?branchId=${encodeURIComponent(branch)}` : '';
    const response = await fetch(`/api/chat/${session.chatId}/history${query}`, {
      headers: { Authorization: `Bearer ${session.token}` },
    });
    const body = await response.json();
    return {
      branchId: body.branchId,
      ids: body.messages
        .filter((m) => m.role === 'user' || m.role === 'assistant')
        .map((m) => m.id),
    };
  }, branchId);
}

// The messages shown as current (not the stale ones something replaced).
async function shownIds(page) {
  return page
    .locator('[data-testid="message"]:not([data-stale="true"])')
    .evaluateAll((nodes) => nodes.map((node) => node.dataset.messageId));
}

async function lastAssistant(page) {
  return page.evaluate(() => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    return nodes.length ? nodes[nodes.length - 1].dataset.messageId : null;
  });
}

// The question card of reply `id`, once it shows: what it says.
async function questionCard(page, id) {
  const card = page.locator(
    `[data-testid="message"][data-message-id="${id}"] [data-testid="question"]`,
  );
  await card.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  return {
    card,
    shown: {
      label: await bubble(page, id).then((b) => b.label),
      status: await page
        .locator(`[data-testid="message"][data-message-id="${id}"]`)
        .getAttribute('data-status'),
      question: await card.getByTestId('question-text').textContent(),
      context: await card.getByTestId('question-context').textContent(),
      options: await card.getByTestId('question-option').allTextContents(),
    },
  };
}

// 8) The model asks a question with options: one click answers it and the reply goes on with
// the answer. Then Regenerate: a new reply on a new branch, which asks again and is answered in
// the box for one's own words; the branch switcher goes back to the first answer and forth
// again, the conversation shown following each time.
async function questionAndBranches(page, outDir) {
  const before = await lastAssistant(page);
  await sendWithClick(
    page,
    '/ask_user {"question": "Which city?", "options": ["Berlin", "Lisbon"],' +
      ' "context": "For the trip"}',
  );
  const first = await lastAssistantId(page, before);
  const asked = await questionCard(page, first);
  const questionShot = join(outDir, 'chat_page_question.png');
  await page.screenshot({ path: questionShot });
  const clickedAt = await page.evaluate(() => performance.now());
  await asked.card.getByTestId('question-option').filter({ hasText: 'Berlin' }).click();
  await asked.card.waitFor({ state: 'detached', timeout: STEP_TIMEOUT_MS });
  await waitForStatus(page, first, 'completed');
  const answered = await bubble(page, first);
  const answeredMs = round((await page.evaluate(() => performance.now())) - clickedAt);
  const branchesBefore = await page.getByTestId('branches').isVisible();

  // Regenerate the reply: a new one takes its place, on a new branch.
  const reply = page.locator(`[data-testid="message"][data-message-id="${first}"]`);
  // Regenerating marks the replaced reply stale before the new one comes: until then the last
  // reply shown is an older one, which must not be taken for the new one.
  const shownBefore = await assistantIds(page);
  await reply.getByTestId('regenerate').click();
  const second = await lastAssistantId(page, shownBefore);
  const again = await questionCard(page, second);
  // The replaced reply stays, stale, and links to the new one.
  const staleFirst = page.locator(`[data-message-id="${first}"][data-stale="true"]`);
  await staleFirst
    .getByTestId('replaced-by')
    .and(page.locator(`[data-target="${second}"]`))
    .waitFor({ timeout: STEP_TIMEOUT_MS });
  const firstStaleOnRegenerate = {
    label: await staleFirst.getByTestId('message-label').textContent(),
    link: await staleFirst.getByTestId('replaced-by').textContent(),
  };
  await again.card.getByTestId('question-answer').fill('Berlin');
  await again.card.getByTestId('question-send').click();
  await again.card.waitFor({ state: 'detached', timeout: STEP_TIMEOUT_MS });
  await waitForStatus(page, second, 'completed');
  const regenerated = await bubble(page, second);

  // The switcher shows once the chat has two branches; the new one is active.
  const switcher = page.getByTestId('branches');
  await switcher.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  const select = page.getByTestId('branch-select');
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid="branch-select"] option').length === 2,
    null,
    { timeout: STEP_TIMEOUT_MS },
  );
  const options = await select.locator('option').evaluateAll((nodes) =>
    nodes.map((node) => ({ value: node.value, text: node.textContent, selected: node.selected })),
  );
  const newBranch = await select.inputValue();
  const oldBranch = options.find((option) => option.value !== newBranch).value;

  // `hides` goes from the page, or (`staleHides`) shows as stale: what replaced it is active.
  const switchTo = async (branch, shows, hides, staleHides = false) => {
    await select.selectOption(branch);
    await page
      .locator(`[data-testid="message"][data-message-id="${shows}"][data-stale="false"]`)
      .waitFor({ timeout: STEP_TIMEOUT_MS });
    const hidden = `[data-testid="message"][data-message-id="${hides}"]`;
    await page
      .locator(staleHides ? `${hidden}[data-stale="true"]` : hidden)
      .waitFor({ state: staleHides ? 'visible' : 'detached', timeout: STEP_TIMEOUT_MS });
    await page.waitForFunction(
      (value) =>
        document.querySelector('[data-testid="branches"]').dataset.activeBranchId === value,
      branch,
      { timeout: STEP_TIMEOUT_MS },
    );
    return {
      branch,
      selected: await select.inputValue(),
      shown: await shownIds(page),
      history: await historyIds(page, null),
      reply: await bubble(page, shows),
    };
  };
  const back = await switchTo(oldBranch, first, second);
  const branchesShot = join(outDir, 'chat_page_branches.png');
  await page.screenshot({ path: branchesShot });
  const forth = await switchTo(newBranch, second, first, true);
  return {
    firstReplyId: first,
    secondReplyId: second,
    asked: asked.shown,
    askedAgain: again.shown,
    answered,
    answeredMs,
    branchesBefore,
    firstStaleOnRegenerate,
    regenerated,
    options,
    newBranch,
    oldBranch,
    back,
    forth,
    screenshots: [questionShot, branchesShot],
  };
}

// 9) Pause a reply while its tool runs; it stops at the next step, shows Paused, and Resume
// with an instruction lets it finish, the instruction reaching the model.
async function pausedTurn(page) {
  const before = await lastAssistant(page);
  await sendWithClick(page, '/sleep 2');
  const id = await lastAssistantId(page, before);
  const selector = `[data-testid="message"][data-message-id="${id}"]`;
  await page.locator(`${selector} [data-testid="progress-chip"]`).first().waitFor({
    timeout: STEP_TIMEOUT_MS,
  });
  const pauseEnabled = await page.getByTestId('pause').isEnabled();
  await page.getByTestId('pause').click();
  await page.waitForFunction(
    (sel) =>
      /Pausing/.test(document.querySelector(`${sel} [data-testid="message-label"]`)?.textContent),
    selector,
    { timeout: STEP_TIMEOUT_MS },
  );
  const pausing = await bubble(page, id);
  await waitForStatus(page, id, 'paused');
  const card = page.locator(`${selector} [data-testid="paused"]`);
  await card.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  const paused = {
    ...(await bubble(page, id)),
    pauseEnabled: await page.getByTestId('pause').isEnabled(),
    cancelEnabled: await page.getByTestId('cancel').isEnabled(),
  };
  await card.getByTestId('resume-instruction').fill('Answer in one line');
  await card.getByTestId('resume').click();
  await card.waitFor({ state: 'detached', timeout: STEP_TIMEOUT_MS });
  await waitForStatus(page, id, 'completed');
  return { assistantMessageId: id, pauseEnabled, pausing, paused, final: await bubble(page, id) };
}

// What the @-completion list offers now: its options' text, the one chosen, and whether the
// message box names it as its active option.
async function mentionList(page) {
  return page.evaluate(() => {
    const list = document.querySelector('[data-testid="mention-list"]');
    const options = [...list.querySelectorAll('[role="option"]')];
    const active = options.find((option) => option.getAttribute('aria-selected') === 'true');
    const input = document.querySelector('[data-testid="composer-input"]');
    return {
      visible: !list.hidden,
      options: options.map((option) => option.textContent),
      active: active?.textContent ?? null,
      announced: Boolean(active) && input.getAttribute('aria-activedescendant') === active.id,
    };
  });
}

// 10) A second assistant: added to the chat through the picker, asked, its reply named; then
// `@` in the message box offers the chat's assistants, and the keyboard completes one.
async function secondAssistant(page) {
  const picker = page.getByTestId('assistant-select');
  const offered = await picker.locator('option').allTextContents();
  await picker.selectOption('add:calculator');
  await page.waitForFunction(
    () => document.querySelector('[data-testid="assistant-select"]').value === 'calculator',
    null,
    { timeout: STEP_TIMEOUT_MS },
  );
  const afterAdding = await picker.locator('option').allTextContents();
  const before = await lastAssistant(page);
  await sendWithClick(page, 'Which of you is this?');
  const id = await lastAssistantId(page, before);
  await waitForStatus(page, id, 'completed');
  const node = page.locator(`[data-testid="message"][data-message-id="${id}"]`);
  const named = await node.getByTestId('message-assistant').textContent();
  const names = await page
    .locator('[data-testid="message"][data-role="assistant"] [data-testid="message-assistant"]')
    .allTextContents();

  await picker.selectOption('');
  const input = page.getByTestId('composer-input');
  await input.fill('');
  await input.click();
  await page.keyboard.type('Ask @');
  const typedAt = await mentionList(page);
  await page.keyboard.press('ArrowDown');
  const movedDown = await mentionList(page);
  await page.keyboard.press('Enter');
  const completed = { value: await input.inputValue(), list: await mentionList(page) };
  await page.keyboard.type('and @hel');
  const narrowed = await mentionList(page);
  await page.keyboard.press('Escape');
  const escaped = { value: await input.inputValue(), list: await mentionList(page) };
  await input.fill('');
  return {
    offered,
    afterAdding,
    assistantMessageId: id,
    reply: await bubble(page, id),
    named,
    names,
    typedAt,
    movedDown,
    completed,
    narrowed,
    escaped,
  };
}

// The replies shown that are none of `known`, in the page's order: each one's assistant, status
// and text, and how many bubbles carry its id.
async function newReplies(page, known) {
  return page.evaluate((ids) => {
    const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    const fresh = [...nodes].filter((node) => !ids.includes(node.dataset.messageId));
    return fresh.map((node) => ({
      id: node.dataset.messageId,
      name: node.querySelector('[data-testid="message-assistant"]').textContent,
      status: node.dataset.status,
      text: node.querySelector('[data-testid="message-text"]').textContent,
      bubbles: document.querySelectorAll(`[data-message-id="${node.dataset.messageId}"]`).length,
    }));
  }, known);
}

// Waits until `count` replies that are none of `known` show, each completed; what they show.
async function completedReplies(page, known, count) {
  await page.waitForFunction(
    ([ids, wanted]) => {
      const nodes = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      const fresh = [...nodes].filter((node) => !ids.includes(node.dataset.messageId));
      return fresh.length >= wanted && fresh.every((node) => node.dataset.status === 'completed');
    },
    [known, count],
    { timeout: STEP_TIMEOUT_MS },
  );
  return newReplies(page, known);
}

// 11) A message to two assistants, by @-mention with the picker on Default: a reply each, named,
// in mention order, each to its final text; the same after a reload.
async function severalAssistants(page) {
  await page.getByTestId('assistant-select').selectOption('');
  const known = await assistantIds(page);
  const sent = '@Calculator @Helper what is 2+2';
  const t0 = await sendWithClick(page, sent);
  const replies = await completedReplies(page, known, 2);
  const entries = await page.evaluate((ids) => window.__timeline.filter((e) => !ids.includes(e.id)), known);
  // Every status each new reply's bubble went through, in order, once each.
  const statuses = {};
  for (const entry of entries.filter((e) => e.at >= t0)) {
    const seen = (statuses[entry.id] = statuses[entry.id] || []);
    if (seen[seen.length - 1] !== entry.status) seen.push(entry.status);
  }
  const userBubbles = await page
    .locator('[data-testid="message"][data-role="user"] [data-testid="message-text"]')
    .allTextContents();
  await page.reload();
  await page.waitForSelector('[data-testid="feed-status"][data-state="live"]', {
    timeout: STEP_TIMEOUT_MS,
  });
  const afterReload = await completedReplies(page, known, 2);
  return {
    sent,
    replies,
    statuses,
    userBubblesSent: userBubbles.filter((text) => text === sent).length,
    afterReload,
    shownAfterReload: await shownIds(page),
    history: await historyIds(page, null),
  };
}

// 12) Pause and Cancel name the assistant of the reply that runs: a question of Calculator's,
// paused and then canceled, with each request's body as sent.
async function controlsOfAnAssistant(page) {
  const bodies = [];
  const record = (request) => {
    if (/\/(cancel|pause)$/.test(request.url())) {
      bodies.push({ route: request.url().split('/').pop(), body: request.postDataJSON() });
    }
  };
  page.on('request', record);
  const picker = page.getByTestId('assistant-select');
  await picker.selectOption('calculator');
  const before = await lastAssistant(page);
  await sendWithClick(page, '/ask_user {"question": "Which number?", "options": ["2", "3"]}');
  const id = await lastAssistantId(page, before);
  await questionCard(page, id);
  // Picked back to Default: the buttons must follow the reply, not the picker.
  await picker.selectOption('');
  const paused = page.waitForResponse((response) => response.url().endsWith('/pause'));
  await page.getByTestId('pause').click();
  const pauseStatus = (await paused).status();
  await page.getByTestId('cancel').click();
  await waitForStatus(page, id, 'canceled');
  page.off('request', record);
  const named = await page
    .locator(`[data-testid="message"][data-message-id="${id}"]`)
    .getByTestId('message-assistant')
    .textContent();
  return { assistantMessageId: id, named, pauseStatus, bodies, final: await bubble(page, id) };
}

async function main() {
  mkdirSync(outDir, { recursive: true });
  const started = Date.now();
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const problems = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    page.on('requestfailed', (request) => {
      // Aborted on purpose when a stream is left (chat switch, unload).
      if (!/ERR_ABORTED/.test(request.failure()?.errorText ?? '')) {
        problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`);
      }
    });
    await page.addInitScript(recordTimeline);
    await page.goto(`${origin}/`);
    await page.waitForSelector('[data-testid="feed-status"][data-state="live"]', {
      timeout: STEP_TIMEOUT_MS,
    });
    const selected = page.locator('[data-testid="chat-list"] [aria-current="page"]');
    const opening = {
      hash: await page.evaluate(() => window.location.hash),
      selectedChatId: await selected.getAttribute('data-chat-id'),
      selectedTitle: await selected.textContent(),
      title: await page.getByTestId('chat-title').textContent(),
    };
    const handoff = await handoffTurn(page, outDir);
    const cancel = await canceledTurn(page);
    const approval = await approvedTurn(page);
    const reload = await reloadedTurn(page);
    const gap = await draftGap(page);
    const timeline = await timelineOfTurn(page, outDir);
    const restart = await restartedServer(page, problems);
    const chats = await switchedChats(page);
    const question = await questionAndBranches(page, outDir);
    const paused = await pausedTurn(page);
    const assistants = await secondAssistant(page);
    const several = await severalAssistants(page);
    const assistantControls = await controlsOfAnAssistant(page);
    // What carried the changes: supabase-js, over Realtime's websocket, never the SSE route.
    const transport = await page.evaluate(() => ({
      supabaseJs: typeof window.supabase?.createClient === 'function',
      sockets: window.__sockets.map((url) => url.replace(/apikey=[^&]+/, 'apikey=…')),
      sseRequests: window.__sseRequests,
      // Chat channels joined as public ones, which anyone who knows the chat's id may join.
      publicJoins: window.__publicJoins,
    }));
    // The refused message's 409 is logged by Chromium as a failed resource load.
    const refusal = problems.findIndex((text) => /status of 409 \(Conflict\)/.test(text));
    if (refusal >= 0) problems.splice(refusal, 1);
    const screenshot = join(outDir, 'chat_page.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    const report = {
      origin,
      opening,
      handoff,
      cancel,
      approval,
      reload,
      gap,
      timeline,
      restart,
      chats,
      question,
      paused,
      assistants,
      several,
      assistantControls,
      transport,
      screenshot,
      problems,
      elapsedMs: Date.now() - started,
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await browser.close();
    runner.close();
  }
}

main().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});
