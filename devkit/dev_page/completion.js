// @-completion in the message box: typing `@` offers the chat's assistants (name and id);
// arrow keys move through them, Enter or Tab completes the mention, Escape closes the list.

import { completeMention, matchingAssistants, mentionAt } from './client/index.js';
import { state } from './conversation.js';
import { els } from './page.js';

const list = { matches: [], active: 0, mention: null, dismissed: null };

const isOpen = () => !els.mentionList.hidden;

function close() {
  els.mentionList.hidden = true;
  els.mentionList.replaceChildren();
  els.input.removeAttribute('aria-activedescendant');
  list.matches = [];
}

function render() {
  els.mentionList.replaceChildren(
    ...list.matches.map((assistant, index) => {
      const item = document.createElement('li');
      item.id = `mention-option-${index}`;
      item.className = 'mention-option';
      item.dataset.testid = 'mention-option';
      item.dataset.index = String(index);
      item.setAttribute('role', 'option');
      item.setAttribute('aria-selected', String(index === list.active));
      const name = document.createElement('span');
      name.className = 'mention-name';
      name.textContent = assistant.name;
      const id = document.createElement('span');
      id.className = 'mention-id';
      id.textContent = `@${assistant.id}`;
      item.append(name, id);
      return item;
    }),
  );
  els.mentionList.hidden = false;
  els.input.setAttribute('aria-activedescendant', `mention-option-${list.active}`);
}

// The list for the mention at the caret, if any assistant of the chat matches it.
function update() {
  const caret = els.input.selectionStart;
  const mention = els.input.selectionEnd === caret ? mentionAt(els.input.value, caret) : null;
  if (!mention || mention.start === list.dismissed) {
    if (!mention) list.dismissed = null;
    close();
    return;
  }
  const matches = matchingAssistants(state.chatAssistants, mention.query);
  if (!matches.length) {
    close();
    return;
  }
  const same = list.mention?.start === mention.start && isOpen();
  list.mention = mention;
  list.matches = matches;
  list.active = same ? Math.min(list.active, matches.length - 1) : 0;
  render();
}

function choose(index) {
  const assistant = list.matches[index];
  if (!assistant || !list.mention) return;
  const done = completeMention(els.input.value, list.mention, els.input.selectionStart, assistant);
  els.input.value = done.text;
  els.input.setSelectionRange(done.caret, done.caret);
  close();
  els.input.focus();
}

function move(step) {
  list.active = (list.active + step + list.matches.length) % list.matches.length;
  render();
}

// A key pressed in the message box while the list is open: whether it was the list's.
export function completionKey(event) {
  if (!isOpen() || event.isComposing) return false;
  if (event.key === 'ArrowDown') move(1);
  else if (event.key === 'ArrowUp') move(-1);
  else if (event.key === 'Enter' || event.key === 'Tab') choose(list.active);
  else if (event.key === 'Escape') {
    list.dismissed = list.mention.start;
    close();
  } else return false;
  event.preventDefault();
  return true;
}

export function wireCompletion() {
  els.input.addEventListener('input', update);
  els.input.addEventListener('click', update);
  els.input.addEventListener('blur', close);
  // A click on an option keeps the focus in the box (no blur, which would close the list).
  els.mentionList.addEventListener('mousedown', (event) => event.preventDefault());
  els.mentionList.addEventListener('click', (event) => {
    const item = event.target.closest('[role="option"]');
    if (item) choose(Number(item.dataset.index));
  });
}
