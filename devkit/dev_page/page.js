// The page's elements, found once at start, and what it says outside the messages: the banner,
// the composer's error line, the feed's status; and text as the page may show it.

export const $ = (testid, root = document) => root.querySelector(`[data-testid="${testid}"]`);
export const els = {};

// A request the page itself stopped (the JavaScript client words a fetch's abort as its own
// error, code `aborted`; a stream cut mid-read stays an AbortError).
export const aborted = (error) => error?.name === 'AbortError' || error?.code === 'aborted';

export function findElements() {
  Object.assign(els, {
    chatList: $('chat-list'),
    newChat: $('new-chat'),
    title: $('chat-title'),
    feedStatus: $('feed-status'),
    banner: $('error-banner'),
    messages: $('messages'),
    empty: $('empty'),
    form: $('composer'),
    input: $('composer-input'),
    strategy: $('strategy'),
    assistantSelect: $('assistant-select'),
    mentionList: $('mention-list'),
    send: $('send'),
    cancel: $('cancel'),
    pause: $('pause'),
    branches: $('branches'),
    branchSelect: $('branch-select'),
    composerError: $('composer-error'),
    userEmail: $('user-email'),
    messageTemplate: document.getElementById('message-template'),
    approvalTemplate: document.getElementById('approval-template'),
    questionTemplate: document.getElementById('question-template'),
    pausedTemplate: document.getElementById('paused-template'),
  });
}

export function showBanner(text) {
  els.banner.textContent = text;
  els.banner.hidden = !text;
}

export function showComposerError(text) {
  els.composerError.textContent = text;
  els.composerError.hidden = !text;
}

export function setFeedState(kind, text) {
  els.feedStatus.dataset.state = kind;
  els.feedStatus.textContent = text;
}

export function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

// Control, format (bidi controls, zero-width characters), separator, surrogate, private-use and
// unassigned characters, and the invisible ones of other categories (agent/display.py).
const HIDDEN =
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\u034f\u115f\u1160\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0\u{e0100}-\u{e01ef}]/gu;

// Each such character as a JSON escape (its UTF-16 units), `\u202e`; but line breaks, which in
// JSON text are the indentation's (a string's own are escaped already).
export function visibleText(text) {
  const escape = (char) =>
    char === '\n'
      ? char
      : char
          .split('')
          .map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
          .join('');
  return text.replace(HIDDEN, escape);
}
