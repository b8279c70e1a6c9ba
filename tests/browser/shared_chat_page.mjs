// Drives the development chat page in two browser contexts, the chat's owner (the demo user)
// and a second user, and prints a JSON report of what each page showed:
//
//   node tests/browser/shared_chat_page.mjs <origin> <output dir> <playwright-core dir> <member>
//
// `member` is JSON, `{ userId, email }`: the second user, a local user of the dev server, whose
// page is opened as theirs with `/?as=<email>`.
// 1) Shared chat: the owner starts a chat, adds the member by e-mail in the members panel; the
//    member sees it in their list, marked, opens it, sends a message; the owner sees who sent
//    it; the member leaves. 2) Cascade: a chat of both demo assistants, three messages, an edit
//    of the first (through the API); the page shows the card, the stale replies linked to their
//    replacements, and Continue lets the cascade go on. The report is the last line.

import { createRequire } from 'node:module';
import { join } from 'node:path';

const [origin, outDir, playwrightDir, memberJson] = process.argv.slice(2);
const member = JSON.parse(memberJson);
const { chromium } = createRequire(import.meta.url)(playwrightDir);
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 30_000;

// What went wrong in a page (its errors, its failed requests), for the report.
const problems = [];
function watch(page, who) {
  page.on('pageerror', (error) => problems.push(`${who}: ${error.message}`));
  page.on('response', (response) => {
    // (The e-mail nobody has is refused on purpose.)
    const refusedAdd = response.status() === 404 && response.url().endsWith('/members');
    if (response.status() >= 400 && !refusedAdd) {
      problems.push(`${who}: ${response.status()} ${response.url()}`);
    }
  });
}

const messageNode = (page, id) => page.locator(`[data-testid="message"][data-message-id="${id}"]`);
const userBubble = (page, text) =>
  page
    .locator('[data-testid="message"][data-role="user"]')
    .filter({ has: page.getByTestId('message-text').getByText(text, { exact: true }) });

async function sendWithEnter(page, text) {
  await page.getByTestId('composer-input').fill(text);
  await page.getByTestId('composer-input').press('Enter');
}

// Waits until `replies` replies of the page have completed.
async function answered(page, replies) {
  await page.waitForFunction(
    (n) => document.querySelectorAll(
      '[data-testid="message"][data-role="assistant"][data-status="completed"]').length === n,
    replies,
    { timeout: STEP_TIMEOUT_MS },
  );
}

// 1) The owner shares a chat; the member writes in it; the owner sees who wrote.
async function sharedChat(browser) {
  const ownerContext = await browser.newContext();
  const owner = await ownerContext.newPage();
  watch(owner, 'owner');
  await owner.goto(origin);
  await owner.getByTestId('feed-status').and(owner.locator('[data-state="live"]')).waitFor();
  const demoChat = /chat=([0-9a-f-]{36})/.exec(owner.url())[1];
  await owner.getByTestId('new-chat').click();
  // The new chat is open once the URL names it (the demo chat is empty too, so an empty list
  // of messages alone does not tell).
  await owner.waitForFunction(
    (before) => !window.location.hash.includes(before) &&
      document.querySelectorAll('[data-testid="message"]').length === 0,
    demoChat,
  );
  const chatId = /chat=([0-9a-f-]{36})/.exec(owner.url())[1];
  await sendWithEnter(owner, 'Hello from the owner');
  await answered(owner, 1);

  await owner.getByTestId('members-toggle').click();
  const panel = owner.getByTestId('members-panel');
  await panel.getByTestId('member-email').fill('nobody@example.com');
  await panel.getByTestId('member-add-button').click();
  await panel.getByTestId('members-error').waitFor({ state: 'visible' });
  const refusedAdd = await panel.getByTestId('members-error').textContent();
  await panel.getByTestId('member-email').fill(member.email.toUpperCase());
  await panel.getByTestId('member-add-button').click();
  await panel.locator(`[data-testid="member"][data-user-id="${member.userId}"]`).waitFor();
  const ownerMembers = await panel.getByTestId('member').evaluateAll((nodes) =>
    nodes.map((n) => [n.querySelector('.member-email').textContent, n.dataset.role,
      n.querySelector('button')?.textContent ?? null]),
  );

  const memberContext = await browser.newContext();
  const guest = await memberContext.newPage();
  watch(guest, 'member');
  await guest.goto(`${origin}/?as=${encodeURIComponent(member.email)}#chat=${chatId}`);
  await guest.getByTestId('feed-status').and(guest.locator('[data-state="live"]')).waitFor();
  const memberHeader = await guest.getByTestId('user-email').textContent();
  const memberTitle = await guest.title();
  const listed = guest.locator(`[data-testid="chat-item"][data-chat-id="${chatId}"]`);
  await listed.waitFor();
  const markedShared = await listed.getByTestId('chat-shared').textContent();
  const ownersMessage = userBubble(guest, 'Hello from the owner');
  await ownersMessage.getByTestId('message-sender').waitFor({ state: 'visible' });
  const ownerNamedForMember = await ownersMessage.getByTestId('message-sender').textContent();
  await sendWithEnter(guest, 'Hello from the member');
  const mine = userBubble(guest, 'Hello from the member').getByTestId('message-sender');
  await mine.waitFor({ state: 'visible' });
  const memberNamedForMember = await mine.textContent();

  // The owner's page, live: the member's message comes with its sender's name.
  const theirs = userBubble(owner, 'Hello from the member').getByTestId('message-sender');
  await theirs.waitFor({ state: 'visible', timeout: STEP_TIMEOUT_MS });
  await owner.waitForFunction(
    (email) => [...document.querySelectorAll('[data-testid="message-sender"]')].some(
      (n) => n.textContent === email),
    member.email,
    { timeout: STEP_TIMEOUT_MS },
  );
  const memberNamedForOwner = await theirs.textContent();
  const ownerNamedForOwner = await userBubble(owner, 'Hello from the owner')
    .getByTestId('message-sender').textContent();
  const shot = join(outDir, 'shared_chat_owner.png');
  await owner.screenshot({ path: shot });

  // The member's panel: no adding, and Leave for themself.
  await guest.getByTestId('members-toggle').click();
  const guestPanel = guest.getByTestId('members-panel');
  await guestPanel.locator(`[data-testid="member"][data-user-id="${member.userId}"]`).waitFor();
  const addFormForMember = await guestPanel.getByTestId('member-add').isVisible();
  const removeButtonsForMember = await guestPanel.getByTestId('member-remove').count();
  await guestPanel.getByTestId('member-leave').click();
  await listed.waitFor({ state: 'detached', timeout: STEP_TIMEOUT_MS });
  // The page opens another chat of theirs (none left: a new one).
  await guest.waitForFunction((id) => !window.location.hash.includes(id), chatId, {
    timeout: STEP_TIMEOUT_MS,
  });
  const afterLeaving = /chat=([0-9a-f-]{36})/.exec(guest.url())?.[1] ?? null;
  await ownerContext.close();
  await memberContext.close();
  return {
    chatId, refusedAdd, ownerMembers, memberHeader, memberTitle, markedShared, ownerNamedForMember,
    memberNamedForMember, memberNamedForOwner, ownerNamedForOwner, addFormForMember,
    removeButtonsForMember, afterLeaving, screenshot: shot,
  };
}

// In the page, with the demo user's token: a chat of both assistants, three messages, each
// read to its end; the first message's id.
async function chatOfTwo(page) {
  return page.evaluate(async () => {
    const session = await (await fetch('/api/dev/session')).json();
    const headers = { Authorization: `Bearer ${session.token}`, 'Content-Type': 'application/json' };
    const created = await fetch('/api/chats', {
      method: 'POST', headers,
      body: JSON.stringify({ title: 'Cascade', assistantIds: ['default', 'calculator'] }),
    });
    const chat = await created.json();
    const say = async (content, extra = {}) => {
      const response = await fetch('/api/chat/respond', {
        method: 'POST', headers, body: JSON.stringify({ chatId: chat.id, content, ...extra }),
      });
      const text = await response.text();
      const metadata = /event: metadata\r?\ndata: (.*)/.exec(text);
      return JSON.parse(metadata[1]);
    };
    const first = await say('@default one');
    await say('@calculator two');
    await say('@default three');
    window.__say = say;
    return { chatId: chat.id, firstId: first.userMessageId };
  });
}

const staleOf = (page) =>
  page.locator('[data-testid="message"][data-stale="true"]').evaluateAll((nodes) =>
    nodes.map((n) => ({
      id: n.dataset.messageId,
      role: n.dataset.role,
      label: n.querySelector('[data-testid="message-label"]').textContent,
      link: n.querySelector('[data-testid="replaced-by"]').hidden ? null
        : n.querySelector('[data-testid="replaced-by"]').dataset.target,
    })),
  );

// 2) An edit's cascade: the card, Continue, and the stale replies linked to their replacements.
async function cascade(browser) {
  const context = await browser.newContext();
  const page = await context.newPage();
  watch(page, 'cascade');
  await page.goto(origin);
  await page.getByTestId('feed-status').and(page.locator('[data-state="live"]')).waitFor();
  const { chatId, firstId } = await chatOfTwo(page);
  await page.evaluate((id) => { window.location.hash = `chat=${id}`; }, chatId);
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid="message"]').length === 6, null,
    { timeout: STEP_TIMEOUT_MS },
  );
  await page.evaluate((id) => window.__say('@default one, again', { editOf: id }), firstId);
  const card = page.getByTestId('cascade-card');
  await card.waitFor({ timeout: STEP_TIMEOUT_MS });
  const cardText = await card.getByTestId('cascade-text').textContent();
  const cascadeId = await card.getAttribute('data-cascade-id');
  const staleAtCard = await staleOf(page);
  const shot = join(outDir, 'cascade_card.png');
  await page.screenshot({ path: shot });
  // The link of the first stale reply scrolls to its replacement and marks it.
  const reply = staleAtCard.find((s) => s.role === 'assistant');
  await messageNode(page, reply.id).getByTestId('replaced-by').click();
  await messageNode(page, reply.link).and(page.locator('[data-highlighted="true"]')).waitFor();
  const highlighted = reply.link;

  await card.getByTestId('cascade-continue').click();
  await page.waitForFunction(
    (n) => document.querySelectorAll('[data-testid="message"][data-stale="true"]').length > n,
    staleAtCard.length,
    { timeout: STEP_TIMEOUT_MS },
  );
  await page.waitForFunction(
    () => !document.querySelector('[data-testid="message"][data-role="assistant"][data-status="streaming"]') &&
      !document.querySelector('[data-testid="message"][data-role="assistant"][data-status="queued"]'),
    null,
    { timeout: STEP_TIMEOUT_MS },
  );
  await page.getByTestId('cascade-card').waitFor({ state: 'detached', timeout: STEP_TIMEOUT_MS });
  const staleAfter = await staleOf(page);
  const current = await page
    .locator('[data-testid="message"][data-stale="false"]')
    .evaluateAll((nodes) => nodes.map((n) => [n.dataset.messageId, n.dataset.role, n.dataset.status]));
  await context.close();
  return { chatId, firstId, cascadeId, cardText, staleAtCard, highlighted, staleAfter, current,
    screenshot: shot };
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const report = { problems };
try {
  report.shared = await sharedChat(browser);
  report.cascade = await cascade(browser);
} catch (error) {
  console.error(problems.join('\n'));
  throw error;
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(report)}\n`);
