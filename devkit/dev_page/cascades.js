// An edit's cascade, as its editor follows it: the card that waits for a decision (N replies
// still depend on your edit: Continue or Stop), Stop while it regenerates, and the history read
// again while a cascade may be open, since its card is a row the chat's feed does not carry.

import { activeReply, state } from './conversation.js';
import { $ } from './page.js';

// While a cascade may be open, the history is read this often; once nothing has run for
// IDLE_POLLS readings in a row (no card, no reply running), the page stops asking.
const WATCH_MS = 1500;
const IDLE_POLLS = 3;
// A card nobody answers is read again this seldom (someone may answer it elsewhere).
const WAITING_MS = 5000;

const PLAIN_WORDS = {
  cascade_not_found: 'This cascade is not waiting any more (it ended, or was stopped).',
  cascade_already_decided: 'This cascade was decided already.',
  not_turn_starter: 'Only the person who made the edit decides its cascade.',
};
const plain = (error) => PLAIN_WORDS[error.code] ?? error.message;

// The cascades this page let go on, by id, until they are seen to end: they offer Stop.
let running = new Map();
let watch = { timer: null, idle: 0, chatId: null, polling: false };

const replies = (n) => (n === 1 ? '1 reply still depends' : `${n} replies still depend`);

function button(testid, text, primary, onClick) {
  const element = document.createElement('button');
  element.type = 'button';
  element.className = primary ? 'button button-primary' : 'button';
  element.dataset.testid = testid;
  element.textContent = text;
  element.addEventListener('click', onClick);
  return element;
}

function card(cascadeId, text, ...buttons) {
  const section = document.createElement('section');
  section.className = 'cascade-card';
  section.dataset.testid = 'cascade-card';
  section.dataset.cascadeId = cascadeId;
  section.setAttribute('aria-label', 'Replies that depend on your edit');
  const words = document.createElement('p');
  words.className = 'cascade-text';
  words.dataset.testid = 'cascade-text';
  words.textContent = text;
  const error = document.createElement('p');
  error.className = 'cascade-error';
  error.dataset.testid = 'cascade-error';
  error.setAttribute('role', 'alert');
  error.hidden = true;
  const actions = document.createElement('div');
  actions.className = 'cascade-actions';
  actions.append(...buttons);
  section.append(words, actions, error);
  return section;
}

async function act(section, request, after) {
  const error = $('cascade-error', section);
  for (const b of section.querySelectorAll('button')) b.disabled = true;
  error.hidden = true;
  try {
    await request();
    after();
  } catch (failure) {
    error.textContent = plain(failure);
    error.hidden = false;
    for (const b of section.querySelectorAll('button')) b.disabled = false;
    return;
  }
  renderCascades();
  watchCascades();
}

function pendingCard(pending) {
  const chatId = state.chatId;
  const done = pending.regenerated ? ` ${pending.regenerated} regenerated so far.` : '';
  const text = `${replies(pending.remaining)} on your edit.${done}`;
  const decide = (approved) => () =>
    act(
      section,
      () => state.client.decideCascade(chatId, pending.id, approved),
      () => {
        state.cascades = state.cascades.filter((c) => c.id !== pending.id);
        if (approved) running.set(pending.id, chatId);
      },
    );
  const section = card(
    pending.id,
    text,
    button('cascade-stop', 'Stop', false, decide(false)),
    button('cascade-continue', 'Continue', true, decide(true)),
  );
  return section;
}

function runningCard(cascadeId) {
  const chatId = state.chatId;
  const stop = () =>
    act(
      section,
      () => state.client.cancelCascade(chatId, cascadeId),
      () => running.delete(cascadeId),
    );
  const section = card(
    cascadeId,
    'Regenerating the replies that depend on your edit…',
    button('cascade-cancel', 'Stop regenerating', false, stop),
  );
  section.dataset.state = 'running';
  return section;
}

// The cards of the open chat, in the box above the composer.
export function renderCascades() {
  const box = $('cascades');
  const pendingIds = new Set(state.cascades.map((c) => c.id));
  const cards = state.cascades.map(pendingCard);
  for (const [id, chatId] of running) {
    if (chatId === state.chatId && !pendingIds.has(id)) cards.push(runningCard(id));
  }
  const key = JSON.stringify([state.cascades, [...running.keys()]]);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...cards);
  box.hidden = !cards.length;
}

async function poll() {
  watch.timer = null;
  if (watch.chatId !== state.chatId || !state.feed) return;
  watch.polling = true;
  try {
    await state.feed.refresh();
  } catch {
    // The feed says what went wrong; the next reading tries again.
  } finally {
    watch.polling = false;
  }
  if (watch.chatId !== state.chatId) return;
  const busy = Boolean(activeReply());
  watch.idle = busy ? 0 : watch.idle + 1;
  if (watch.idle >= IDLE_POLLS) {
    // Nothing ran for a while: what this page let go on has ended.
    for (const [id, chatId] of running) if (chatId === state.chatId) running.delete(id);
    renderCascades();
  }
  schedule();
}

function schedule() {
  if (watch.timer || watch.polling || watch.chatId !== state.chatId) return;
  const open = [...running.values()].includes(state.chatId);
  if (watch.idle < IDLE_POLLS || open) watch.timer = setTimeout(poll, WATCH_MS);
  else if (state.cascades.length) watch.timer = setTimeout(poll, WAITING_MS);
}

// Something replaced a message (an edit's cascade may follow), or a card is up: read the
// history until nothing runs and no card waits.
export function watchCascades() {
  if (watch.chatId !== state.chatId) {
    clearTimeout(watch.timer);
    watch = { timer: null, idle: 0, chatId: state.chatId, polling: false };
  }
  watch.idle = 0;
  schedule();
}

// A card is shown: keep reading the history while it waits (answered elsewhere, it goes).
export function followCards() {
  if (watch.chatId !== state.chatId) watchCascades();
  else schedule();
}

// Another chat opened: the last one's watch ends (its running cascades are kept, by chat).
export function resetCascades() {
  clearTimeout(watch.timer);
  watch = { timer: null, idle: IDLE_POLLS, chatId: state.chatId, polling: false };
  state.cascades = [];
}
