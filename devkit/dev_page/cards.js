// What a reply asks of the user, in its bubble: a tool call to approve, the model's question,
// and Resume for a paused reply.

import { awaitsAnswer, awaitsApproval, state } from './conversation.js';
import { renderMessage, rerender } from './messages.js';
import { $, els, showComposerError, visibleText } from './page.js';

function disableAll(inputs, disabled) {
  inputs.forEach((input) => { input.disabled = disabled; });
}

export function renderApproval(bubble, message) {
  const pending = message.pendingApproval;
  const existing = $('approval', bubble);
  if (!awaitsApproval(message)) {
    existing?.remove();
    return;
  }
  if (existing && existing.dataset.toolCallId === pending.toolCallId) return;
  existing?.remove();
  const card = els.approvalTemplate.content.firstElementChild.cloneNode(true);
  card.dataset.toolCallId = pending.toolCallId;
  $('approval-tool', card).textContent = pending.name;
  // The server's `display` escapes what could hide or reorder text; a question asked before it
  // had one is escaped here the same way.
  $('approval-args', card).textContent = visibleText(
    pending.display ?? JSON.stringify(pending.args ?? {}, null, 2),
  );
  const note = $('approval-note', card);
  const decide = async (approved) => {
    const buttons = card.querySelectorAll('button');
    disableAll(buttons, true);
    const error = $('approval-error', card);
    error.hidden = true;
    try {
      await state.client.approve(state.chatId, pending.toolCallId, approved, note.value.trim());
      message.decided.add(pending.toolCallId);
      renderMessage(message);
    } catch (failure) {
      if (failure.code === 'approval_already_decided' || failure.code === 'approval_not_found') {
        message.decided.add(pending.toolCallId);
        renderMessage(message);
        showComposerError(failure.message);
        return;
      }
      error.textContent = failure.message;
      error.hidden = false;
      disableAll(buttons, false);
    }
  };
  $('approve', card).addEventListener('click', () => decide(true));
  $('reject', card).addEventListener('click', () => decide(false));
  $('message-text', bubble).after(card);
}

function optionButton(option, answer) {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'button question-option';
  button.dataset.testid = 'question-option';
  button.textContent = visibleText(String(option));
  button.addEventListener('click', () => answer(String(option)));
  return button;
}

// The model's question: its context, one button per suggested answer, and a box for one's own.
export function renderQuestion(bubble, message) {
  const pending = message.pendingQuestion;
  const existing = $('question', bubble);
  if (!awaitsAnswer(message)) {
    existing?.remove();
    return;
  }
  if (existing && existing.dataset.questionId === pending.questionId) return;
  existing?.remove();
  const card = els.questionTemplate.content.firstElementChild.cloneNode(true);
  card.dataset.questionId = pending.questionId;
  // The model wrote these: whatever could hide or reorder text shows as an escape.
  $('question-text', card).textContent = visibleText(String(pending.question ?? ''));
  const context = $('question-context', card);
  context.textContent = visibleText(String(pending.context ?? ''));
  context.hidden = !pending.context;
  const own = $('question-answer', card);
  const error = $('question-error', card);
  const answer = async (text) => {
    const inputs = card.querySelectorAll('button, input');
    disableAll(inputs, true);
    error.hidden = true;
    try {
      await state.client.answer(state.chatId, pending.questionId, text);
      message.answered.add(pending.questionId);
      rerender(message);
    } catch (failure) {
      if (
        failure.code === 'question_already_answered' ||
        failure.code === 'question_not_pending'
      ) {
        // Answered elsewhere, timed out or canceled: this card has nothing left to ask.
        message.answered.add(pending.questionId);
        rerender(message);
        showComposerError(failure.message);
        return;
      }
      error.textContent = `Not answered: ${failure.message}`;
      error.hidden = false;
      disableAll(inputs, false);
    }
  };
  const options = Array.isArray(pending.options) ? pending.options : [];
  $('question-options', card).replaceChildren(...options.map((option) => optionButton(option, answer)));
  $('question-own', card).addEventListener('submit', (event) => {
    event.preventDefault();
    if (own.value.trim()) answer(own.value.trim());
  });
  $('message-text', bubble).after(card);
}

// A paused reply: Resume, with an optional instruction for the rest of its turn.
export function renderPaused(bubble, message) {
  const existing = $('paused', bubble);
  if (message.role !== 'assistant' || message.status !== 'paused') {
    existing?.remove();
    return;
  }
  if (existing) return;
  const card = els.pausedTemplate.content.firstElementChild.cloneNode(true);
  const form = card.querySelector('form');
  const instruction = $('resume-instruction', card);
  const error = $('paused-error', card);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const inputs = card.querySelectorAll('button, input');
    disableAll(inputs, true);
    error.hidden = true;
    try {
      await state.client.resume(state.chatId, {
        instruction: instruction.value.trim(),
        assistantId: message.assistantId,
      });
      if (state.feed?.status !== 'live') await state.feed?.refresh();
    } catch (failure) {
      error.textContent = `Not resumed: ${failure.message}`;
      error.hidden = false;
      disableAll(inputs, false);
    }
  });
  $('message-text', bubble).after(card);
}
