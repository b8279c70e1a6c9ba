// The development chat page: plain ES modules, no build step when it runs (client/ is built
// and committed), no network beyond this origin.
//
// A turn's first tokens come from POST /api/chat/respond (SSE read with fetch, since
// EventSource cannot POST). Whatever continues in the background arrives as row changes of
// `message` and `message_draft`, through Supabase Realtime with supabase-js (its browser build,
// vendor/supabase.js, which index.html loads as the `supabase` global), subscribed as the
// docs/realtime.md tells a production frontend to; the dev server speaks Realtime's protocol.
//
// The server is spoken to through the JavaScript client (clients/js; its browser build is
// client/, committed, imported as it is): every route, a turn's SSE stream, the @-mentions.
// protocol/ holds what the dev server adds and knows nothing of the page: session.js (the demo
// user's session, or the `?as=<email>` user's, renewed when refused, and supabase-js's client
// per project key, which it makes the package's client with). A chat is followed live by the package's feed, on the page's
// own model of its messages (live.js). The page, by concern: conversation.js (the messages as
// the page holds them),
// messages.js (their bubbles), cards.js (approvals, questions, resume), timeline.js (a reply's
// waterfall), composer.js (sending, streaming, cancel, pause, regenerate), completion.js (the
// @-completion), assistants.js (the picker), chats.js (the list and opening a chat),
// members.js (who is in the chat, and the senders' names), cascades.js (an edit's cascade
// card), branches.js (the switcher), page.js (elements, banners, text).

import { loadAssistants, wirePicker } from './assistants.js';
import { activateBranch } from './branches.js';
import { chatFromHash, leftChat, loadChats, newChat, openChat } from './chats.js';
import { completionKey, wireCompletion } from './completion.js';
import { cancel, pause, send, updateControls } from './composer.js';
import { state } from './conversation.js';
import { wireMembers } from './members.js';
import { DevConnection } from './protocol/session.js';
import { els, findElements, setFeedState, showBanner } from './page.js';

function wire() {
  els.form.addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  els.input.addEventListener('keydown', (event) => {
    if (completionKey(event)) return;
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  wireCompletion();
  wirePicker();
  els.cancel.addEventListener('click', cancel);
  els.pause.addEventListener('click', pause);
  els.branchSelect.addEventListener('change', () => activateBranch(els.branchSelect.value));
  for (const example of document.querySelectorAll('[data-testid="example"]')) {
    example.addEventListener('click', () => {
      els.input.value = example.dataset.example;
      els.input.focus();
    });
  }
  els.newChat.addEventListener('click', newChat);
  wireMembers(leftChat);
  els.messages.addEventListener('scroll', () => {
    const { scrollTop, scrollHeight, clientHeight } = els.messages;
    state.stickToBottom = scrollHeight - scrollTop - clientHeight < 48;
  });
  window.addEventListener('hashchange', () => {
    const chatId = chatFromHash();
    if (chatId && chatId !== state.chatId) openChat(chatId);
  });
}

async function start() {
  findElements();
  wire();
  updateControls();
  state.connection = new DevConnection({
    origin: window.location.origin,
    createClient: (...args) => window.supabase.createClient(...args),
    // `/?as=bob@example.com`: the page is that local user's, a second person on this machine.
    as: new URLSearchParams(window.location.search).get('as'),
  });
  state.client = state.connection.api;
  try {
    state.session = await state.connection.signIn();
  } catch (error) {
    showBanner(`Could not start a session: ${error.message}`);
    setFeedState('down', 'Offline');
    return;
  }
  els.userEmail.textContent = state.session.email;
  try {
    await loadAssistants();
  } catch (error) {
    showBanner(`Could not list the assistants: ${error.message}`);
  }
  try {
    await loadChats();
  } catch (error) {
    showBanner(`Could not list your chats: ${error.message}`);
  }
  const wanted = chatFromHash();
  openChat(wanted || state.session.chatId);
  els.input.focus();
}

start();
