// @-mentions as the message box completes them: the mention being typed at the caret, the
// assistants it may name, and the text with one chosen. The server reads a mention as `@id` or
// `@Display Name`, case-insensitively (agent/mentions.py); the completion writes `@id`, which
// has no spaces. No DOM here.

// The mention typed up to `caret`: an `@` at the start or after whitespace, and what follows it
// (no whitespace yet); null when the caret is in none.
export function mentionAt(text, caret) {
  const before = text.slice(0, caret);
  const match = /(^|\s)@([^\s@]*)$/.exec(before);
  if (!match) return null;
  return { start: caret - match[2].length - 1, query: match[2] };
}

// The assistants whose id, name or a word of the name begins with `query`, case-insensitively,
// in their order.
export function matchingAssistants(assistants, query) {
  const wanted = query.toLowerCase();
  return assistants.filter((assistant) => {
    const words = [assistant.id, assistant.name, ...assistant.name.split(/\s+/)];
    return words.some((word) => word.toLowerCase().startsWith(wanted));
  });
}

// `text` with the mention at `mention` (up to `caret`) naming `assistant`, and the caret after
// it and the space that follows.
export function completeMention(text, mention, caret, assistant) {
  const inserted = `@${assistant.id} `;
  const after = text.slice(caret).replace(/^[^\s]*\s?/, '');
  return {
    text: text.slice(0, mention.start) + inserted + after,
    caret: mention.start + inserted.length,
  };
}
