// The open chat's members: who is in it (e-mail and role), adding someone by e-mail and
// removing them (the chat's owner), leaving it (a member); and the names the page gives the
// senders of user messages.

import { controls, state } from './conversation.js';
import { renderAll } from './messages.js';
import { $ } from './page.js';

// The server's refusals, in the words of someone managing a chat.
const PLAIN_WORDS = {
  not_chat_owner: "Only the chat's owner can do that.",
  chat_or_user_not_found: 'Nobody with that e-mail has an account here.',
  owner_stays: "The owner stays in their chat; they may delete it instead.",
  member_not_found: 'They are not in this chat any more.',
  chat_not_found: 'You are no longer in this chat.',
};

const plain = (error) => PLAIN_WORDS[error.code] ?? error.message;

// Sender ids already asked about: a sender who left is looked up once, not at every render.
let asked = new Set();
// What the page does once its user left the chat (wireMembers says).
let onLeave = () => {};

function showError(text) {
  const error = $('members-error');
  error.textContent = text;
  error.hidden = !text;
}

function memberItem(member) {
  const item = document.createElement('li');
  item.className = 'member';
  item.dataset.testid = 'member';
  item.dataset.userId = member.userId;
  item.dataset.role = member.role;
  const email = document.createElement('span');
  email.className = 'member-email';
  email.textContent = member.email ?? member.userId;
  const role = document.createElement('span');
  role.className = 'member-role';
  role.textContent = member.role === 'owner' ? 'owner' : 'member';
  item.append(email, role);
  const self = member.userId === state.session.userId;
  // The owner removes anyone but themself; a member removes themself only (leaves).
  const removable = member.role !== 'owner' && (state.role === 'owner' || self);
  if (removable) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link-button';
    button.dataset.testid = self ? 'member-leave' : 'member-remove';
    button.textContent = self ? 'Leave' : 'Remove';
    button.addEventListener('click', () => remove(member, button));
    item.append(button);
  }
  return item;
}

export function renderMembers() {
  const list = [...state.members.values()];
  $('members-count').textContent = String(list.length || 1);
  $('members-list').replaceChildren(...list.map((member) => memberItem(member)));
  $('member-add').hidden = state.role !== 'owner';
}

// The chat's members, read again; the caller's role among them.
export async function loadMembers() {
  const chatId = state.chatId;
  let members;
  try {
    members = await state.client.members(chatId);
  } catch (error) {
    if (chatId === state.chatId) showError(`Could not list the members: ${plain(error)}`);
    return;
  }
  if (chatId !== state.chatId) return;
  state.members = new Map(members.map((member) => [member.userId, member]));
  state.role = state.members.get(state.session.userId)?.role ?? state.role;
  renderMembers();
  // The senders' names follow (a chat with a second person names them all).
  renderAll();
}

// A sender the page cannot name yet (a member who joined since the list was read): read it
// again, once for each such sender.
export function noteSenders() {
  const unknown = [...state.messages.values()].filter(
    (m) => m.senderId && !state.members.has(m.senderId) && !asked.has(m.senderId),
  );
  if (!unknown.length) return false;
  for (const message of unknown) asked.add(message.senderId);
  loadMembers();
  return true;
}

async function remove(member, button) {
  button.disabled = true;
  showError('');
  const chatId = state.chatId;
  const leaving = member.userId === state.session.userId;
  // Nothing more is asked of a chat the user is leaving (the server would answer 404).
  if (leaving) controls.leaving = chatId;
  try {
    await state.client.removeMember(chatId, member.userId);
  } catch (error) {
    if (leaving) controls.leaving = null;
    button.disabled = false;
    showError(plain(error));
    return;
  }
  if (leaving) {
    onLeave(chatId);
    return;
  }
  await loadMembers();
}

async function add() {
  const input = $('member-email');
  const email = input.value.trim();
  if (!email) return;
  const button = $('member-add-button');
  button.disabled = true;
  showError('');
  try {
    await state.client.addMember(state.chatId, { email });
    input.value = '';
    await loadMembers();
  } catch (error) {
    showError(`Not added: ${plain(error)}`);
  } finally {
    button.disabled = false;
  }
}

// The panel's controls, once; `leave(chatId)`: what the page does once the user left.
export function wireMembers(leave) {
  onLeave = leave;
  const toggle = $('members-toggle');
  toggle.addEventListener('click', () => {
    const panel = $('members-panel');
    panel.hidden = !panel.hidden;
    toggle.setAttribute('aria-expanded', String(!panel.hidden));
    if (!panel.hidden) loadMembers();
  });
  $('member-add').addEventListener('submit', (event) => {
    event.preventDefault();
    add();
  });
}

// Another chat opened: nothing of the last one's members stays.
export function resetMembers(role) {
  state.members = new Map();
  state.role = role ?? null;
  asked = new Set();
  showError('');
  renderMembers();
}
