// Every route of the API a frontend calls (docs/api.md#routes), typed. Turns (respond,
// regenerate) answer the accepted SSE response; the rest their JSON.
const id = encodeURIComponent;
const chatPath = (chatId, rest = '') => `/api/chat/${id(chatId)}${rest}`;
const named = (assistantId) => (assistantId ? { assistantId } : {});
function query(params) {
    const pairs = Object.entries(params).filter(([, value]) => value !== undefined && value !== false);
    if (!pairs.length)
        return '';
    return `?${new URLSearchParams(pairs.map(([k, v]) => [k, String(v)])).toString()}`;
}
export class Routes {
    http;
    constructor(http) {
        this.http = http;
    }
    /** POST /api/chat/respond: the accepted SSE response (read it with `readSse`). */
    respond(body, signal) {
        return this.http.send('/api/chat/respond', { method: 'POST', body, signal, accept: 'text/event-stream' });
    }
    regenerate(chatId, messageId, options = {}, signal) {
        const body = {
            ...named(options.assistantId),
            ...(options.multitaskStrategy ? { multitaskStrategy: options.multitaskStrategy } : {}),
        };
        const path = chatPath(chatId, `/messages/${id(messageId)}/regenerate`);
        return this.http.send(path, { method: 'POST', body, signal, accept: 'text/event-stream' });
    }
    history(chatId, options = {}) {
        return this.http.json(chatPath(chatId, `/history${query({ ...options })}`));
    }
    cancel(chatId, assistantId) {
        return this.http.json(chatPath(chatId, '/cancel'), { method: 'POST', body: named(assistantId) });
    }
    pause(chatId, assistantId) {
        return this.http.json(chatPath(chatId, '/pause'), { method: 'POST', body: named(assistantId) });
    }
    resume(chatId, options = {}) {
        const body = { ...named(options.assistantId), ...(options.instruction ? { instruction: options.instruction } : {}) };
        return this.http.json(chatPath(chatId, '/resume'), { method: 'POST', body });
    }
    approve(chatId, toolCallId, approved, note) {
        const body = note ? { approved, note } : { approved };
        return this.http.json(chatPath(chatId, `/approvals/${id(toolCallId)}`), { method: 'POST', body });
    }
    answer(chatId, questionId, answer) {
        return this.http.json(chatPath(chatId, `/answers/${id(questionId)}`), { method: 'POST', body: { answer } });
    }
    branches(chatId, assistantId) {
        return this.http.json(chatPath(chatId, `/branches${query({ assistantId })}`));
    }
    activateBranch(chatId, branchId, assistantId) {
        const path = chatPath(chatId, `/branches/${id(branchId)}/activate${query({ assistantId })}`);
        return this.http.json(path, { method: 'POST', body: {} });
    }
    async chats(limit) {
        return (await this.http.json(`/api/chats${query({ limit })}`)).chats;
    }
    createChat(options = {}) {
        return this.http.json('/api/chats', { method: 'POST', body: options });
    }
    deleteChat(chatId) {
        return this.http.json(`/api/chats/${id(chatId)}`, { method: 'DELETE' });
    }
    deleteMessage(chatId, messageId) {
        return this.http.json(chatPath(chatId, `/messages/${id(messageId)}`), { method: 'DELETE' });
    }
    async assistants() {
        return (await this.http.json('/api/assistants')).assistants;
    }
    async chatAssistants(chatId) {
        return (await this.http.json(`/api/chats/${id(chatId)}/assistants`)).assistants;
    }
    async addChatAssistant(chatId, assistantId, isDefault = false) {
        const body = isDefault ? { assistantId, default: true } : { assistantId };
        const path = `/api/chats/${id(chatId)}/assistants`;
        return (await this.http.json(path, { method: 'POST', body })).assistants;
    }
    async removeChatAssistant(chatId, assistantId) {
        const path = `/api/chats/${id(chatId)}/assistants/${id(assistantId)}`;
        return (await this.http.json(path, { method: 'DELETE' })).assistants;
    }
    usage() {
        return this.http.json('/api/usage');
    }
    // Shared chats (docs/api.md#shared-chats).
    /** The chat's owner first, then its members as they joined; for anyone in the chat. */
    async members(chatId) {
        return (await this.http.json(`/api/chats/${id(chatId)}/members`)).members;
    }
    /** Adds an existing user, by id or e-mail, to the caller's chat (the owner's alone): the
     * member, whether just added or already in it. 404 `chat_or_user_not_found` for a chat not
     * the caller's and for an unknown user alike; 422 `too_many_members`. */
    addMember(chatId, who) {
        const body = who.userId !== undefined ? { userId: who.userId } : { email: who.email };
        return this.http.json(`/api/chats/${id(chatId)}/members`, { method: 'POST', body });
    }
    /** Removes a member (the owner), or leaves (a member removing themself). 403
     * `not_chat_owner`, 409 `owner_stays`, 404 `member_not_found`. */
    async removeMember(chatId, userId) {
        await this.http.json(`/api/chats/${id(chatId)}/members/${id(userId)}`, { method: 'DELETE' });
    }
    // An edit's cascade (docs/conversation-control.md#cascading-regeneration).
    /** Answers a cascade's card: approved, it regenerates the next batch; declined, the rest
     * stay as they are. 404 `cascade_not_found`, 409 `cascade_already_decided`. */
    decideCascade(chatId, cascadeId, approved) {
        const path = chatPath(chatId, `/cascades/${id(cascadeId)}/decision`);
        return this.http.json(path, { method: 'POST', body: { approved } });
    }
    /** Stops a cascade before its next regeneration. 404 `cascade_not_found` unless it runs or
     * waits. */
    cancelCascade(chatId, cascadeId) {
        return this.http.json(chatPath(chatId, `/cascades/${id(cascadeId)}/cancel`), { method: 'POST', body: {} });
    }
}
