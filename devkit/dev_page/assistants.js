// The assistant picker: the chat's assistants (GET /api/chats/{chatId}/assistants), the one a
// message is sent to, and the deployment's others (GET /api/assistants), each added to the chat
// by picking it. "Default" names none: the chat's default answers, or whom the message
// @-mentions.

import { state } from './conversation.js';
import { renderAll } from './messages.js';
import { els, showComposerError } from './page.js';

// An option that adds the deployment's assistant to the chat, by id.
const ADD = 'add:';

function option(value, text) {
  const node = document.createElement('option');
  node.value = value;
  node.textContent = text;
  return node;
}

function renderPicker(picked) {
  const inChat = new Set(state.chatAssistants.map((a) => a.id));
  const fallback = state.chatAssistants.find((a) => a.isDefault);
  const options = [option('', fallback ? `Default: ${fallback.name}` : 'Default')];
  for (const assistant of state.chatAssistants) options.push(option(assistant.id, assistant.name));
  const others = state.assistants.filter((a) => !inChat.has(a.id));
  if (others.length) {
    const group = document.createElement('optgroup');
    group.label = 'Add to this chat';
    group.append(...others.map((a) => option(`${ADD}${a.id}`, `Add ${a.name}`)));
    options.push(group);
  }
  els.assistantSelect.replaceChildren(...options);
  els.assistantSelect.value = inChat.has(picked) ? picked : '';
  els.assistantSelect.dataset.picked = els.assistantSelect.value;
}

// The deployment's assistants, once: their names label the replies.
export async function loadAssistants() {
  state.assistants = await state.client.assistants();
  renderPicker(pickedAssistantId());
}

// The open chat's assistants, for the picker and the @-completion.
export async function loadChatAssistants() {
  const chatId = state.chatId;
  state.chatAssistants = [];
  renderPicker('');
  let listed;
  try {
    listed = await state.client.chatAssistants(chatId);
  } catch (error) {
    if (chatId !== state.chatId) return;
    showComposerError(`Could not list the chat's assistants: ${error.message}`);
    return;
  }
  if (chatId !== state.chatId) return;
  state.chatAssistants = listed;
  renderPicker('');
  renderAll();
}

// The assistant picked for the next message: its id, or null for the chat's choice.
export function pickedAssistantId() {
  return els.assistantSelect.dataset.picked || null;
}

async function onPick() {
  const select = els.assistantSelect;
  if (!select.value.startsWith(ADD)) {
    select.dataset.picked = select.value;
    return;
  }
  const chatId = state.chatId;
  const assistantId = select.value.slice(ADD.length);
  select.disabled = true;
  showComposerError('');
  try {
    const listed = await state.client.addChatAssistant(chatId, assistantId);
    if (chatId !== state.chatId) return;
    state.chatAssistants = listed;
    renderPicker(assistantId);
  } catch (error) {
    showComposerError(`Could not add the assistant: ${error.message}`);
    renderPicker(select.dataset.picked);
  } finally {
    select.disabled = false;
  }
}

export function wirePicker() {
  els.assistantSelect.addEventListener('change', onPick);
  renderPicker('');
}
