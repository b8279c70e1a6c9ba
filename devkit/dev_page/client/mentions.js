// @-mentions as a message box completes them: the mention being typed at the caret, the
// assistants it may name, and the text with one chosen. The server reads a mention as `@id` or
// `@Display Name`, case-insensitively; the completion writes `@id`, which has no spaces.
/** The mention typed up to `caret` (an `@` at the start or after whitespace, and what follows
 * it); null when the caret is in none. */
export function mentionAt(text, caret) {
    const match = /(^|\s)@([^\s@]*)$/.exec(text.slice(0, caret));
    if (!match)
        return null;
    const query = match[2] ?? '';
    return { start: caret - query.length - 1, query };
}
/** The assistants whose id, name or a word of the name begins with `query`, in their order. */
export function matchingAssistants(assistants, query) {
    const wanted = query.toLowerCase();
    return assistants.filter((assistant) => [assistant.id, assistant.name, ...assistant.name.split(/\s+/)].some((word) => word.toLowerCase().startsWith(wanted)));
}
/** `text` with the mention at `mention` (up to `caret`) naming `assistant`, and the caret after
 * it and the space that follows. */
export function completeMention(text, mention, caret, assistant) {
    const inserted = `@${assistant.id} `;
    const after = text.slice(caret).replace(/^[^\s]*\s?/, '');
    return { text: text.slice(0, mention.start) + inserted + after, caret: mention.start + inserted.length };
}
