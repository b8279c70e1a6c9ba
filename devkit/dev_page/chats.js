// The chats list, and opening a chat: its messages, followed live (live.js).

import { loadChatAssistants } from './assistants.js';
import { resetCascades } from './cascades.js';
import { loadMembers, resetMembers } from './members.js';
import { state } from './conversation.js';
import { followChat } from './live.js';
import { afterRender } from './messages.js';
import { els, formatTime, showBanner, showComposerError } from './page.js';

function chatLink(chat) {
  const link = document.createElement('a');
  link.href = `#chat=${chat.id}`;
  link.className = 'chat-link';
  link.dataset.testid = 'chat-item';
  link.dataset.chatId = chat.id;
  if (chat.id === state.chatId) link.setAttribute('aria-current', 'page');
  const title = document.createElement('span');
  title.className = 'chat-link-title';
  title.textContent = chat.title || 'Untitled chat';
  const when = document.createElement('span');
  when.className = 'chat-link-time';
  when.textContent = formatTime(chat.updatedAt || chat.createdAt);
  link.append(title, when);
  // Someone else's chat the user was added to.
  link.dataset.role = chat.role ?? 'owner';
  if (chat.role === 'member') {
    const mark = document.createElement('span');
    mark.className = 'chat-link-shared';
    mark.dataset.testid = 'chat-shared';
    mark.textContent = 'shared with you';
    link.append(mark);
  }
  return link;
}

function renderChats() {
  els.chatList.replaceChildren(
    ...state.chats.map((chat) => {
      const item = document.createElement('li');
      item.append(chatLink(chat));
      return item;
    }),
  );
  const current = state.chats.find((chat) => chat.id === state.chatId);
  els.title.textContent = current ? current.title || 'Untitled chat' : 'Chat';
  // Whose page it is, when it is another local user's (`?as=`): two people's tabs tell apart.
  const whose = state.connection?.as && state.session ? ` · ${state.session.email}` : '';
  document.title = `${els.title.textContent}${whose} · Handoff`;
}

export function chatFromHash() {
  const match = /(?:^#|&)chat=([0-9a-fA-F-]{36})/.exec(window.location.hash);
  return match ? match[1].toLowerCase() : null;
}

export async function loadChats() {
  state.chats = await state.client.chats();
  renderChats();
}

export function openChat(chatId) {
  if (chatId === state.chatId && state.feed) return;
  state.generation += 1;
  const leaving = state.feed ? state.feed.close() : Promise.resolve();
  state.feed = null;
  for (const turn of state.turns) turn.controller.abort();
  state.turns = new Set();
  state.sending = false;
  state.chatId = chatId;
  state.messages = new Map();
  state.drafts = new Map();
  for (const entry of state.timelines.values()) clearTimeout(entry.timer);
  state.timelines = new Map();
  els.messages.replaceChildren();
  showComposerError('');
  showBanner('');
  if (window.location.hash !== `#chat=${chatId}`) {
    history.replaceState(null, '', `#chat=${chatId}`);
  }
  resetMembers(state.chats.find((chat) => chat.id === chatId)?.role);
  resetCascades();
  renderChats();
  afterRender();
  // Once the previous chat's channel is left (supabase-js hands out the channel of a topic it
  // still holds, and this may be the same chat again).
  const generation = state.generation;
  leaving.then(() => {
    if (state.generation === generation) state.feed = followChat(chatId);
  });
  loadChatAssistants();
  loadMembers();
}

// The user left `chatId`: it goes from the list, and the page opens another of theirs.
export async function leftChat(chatId) {
  state.chats = state.chats.filter((chat) => chat.id !== chatId);
  try {
    await loadChats();
  } catch (error) {
    showBanner(`Could not list your chats: ${error.message}`);
  }
  if (state.chatId !== chatId) return;
  // Another of theirs; none left, a new one.
  if (state.chats.length) openChat(state.chats[0].id);
  else await newChat();
}

export async function newChat() {
  els.newChat.disabled = true;
  try {
    const chat = await state.client.createChat();
    state.chats = [chat, ...state.chats.filter((c) => c.id !== chat.id)];
    window.location.hash = `chat=${chat.id}`;
    openChat(chat.id);
    els.input.focus();
  } catch (error) {
    showBanner(`Could not create a chat: ${error.message}`);
  } finally {
    els.newChat.disabled = false;
  }
}
