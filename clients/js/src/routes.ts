// Every route of the API a frontend calls (docs/api.md#routes), typed. Turns (respond,
// regenerate) answer the accepted SSE response; the rest their JSON.

import type { Http } from './http.js';
import type {
  Assistant,
  Branches,
  CascadeDecision,
  Chat,
  ChatAssistant,
  History,
  Member,
  MultitaskStrategy,
  NewMember,
} from './types.js';

export interface RespondBody {
  chatId: string;
  content: string;
  userMessageId?: string;
  assistantId?: string;
  editOf?: string;
  multitaskStrategy?: MultitaskStrategy;
}

export interface HistoryQuery {
  assistantId?: string;
  branchId?: string;
  all?: boolean;
}

const id = encodeURIComponent;
const chatPath = (chatId: string, rest = '') => `/api/chat/${id(chatId)}${rest}`;
const named = (assistantId?: string) => (assistantId ? { assistantId } : {});

function query(params: Record<string, string | number | boolean | undefined>): string {
  const pairs = Object.entries(params).filter(([, value]) => value !== undefined && value !== false);
  if (!pairs.length) return '';
  return `?${new URLSearchParams(pairs.map(([k, v]) => [k, String(v)])).toString()}`;
}

export class Routes {
  constructor(readonly http: Http) {}

  /** POST /api/chat/respond: the accepted SSE response (read it with `readSse`). */
  respond(body: RespondBody, signal?: AbortSignal): Promise<Response> {
    return this.http.send('/api/chat/respond', { method: 'POST', body, signal, accept: 'text/event-stream' });
  }

  regenerate(
    chatId: string,
    messageId: string,
    options: { assistantId?: string; multitaskStrategy?: 'reject' | 'interrupt' } = {},
    signal?: AbortSignal,
  ): Promise<Response> {
    const body = {
      ...named(options.assistantId),
      ...(options.multitaskStrategy ? { multitaskStrategy: options.multitaskStrategy } : {}),
    };
    const path = chatPath(chatId, `/messages/${id(messageId)}/regenerate`);
    return this.http.send(path, { method: 'POST', body, signal, accept: 'text/event-stream' });
  }

  history(chatId: string, options: HistoryQuery = {}): Promise<History> {
    return this.http.json(chatPath(chatId, `/history${query({ ...options })}`));
  }

  cancel(chatId: string, assistantId?: string): Promise<{ canceled: boolean; assistantMessageId: string | null }> {
    return this.http.json(chatPath(chatId, '/cancel'), { method: 'POST', body: named(assistantId) });
  }

  pause(chatId: string, assistantId?: string): Promise<{ pausing: boolean; assistantMessageId: string }> {
    return this.http.json(chatPath(chatId, '/pause'), { method: 'POST', body: named(assistantId) });
  }

  resume(
    chatId: string,
    options: { instruction?: string; assistantId?: string } = {},
  ): Promise<{ resumed: boolean; assistantMessageId: string }> {
    const body = { ...named(options.assistantId), ...(options.instruction ? { instruction: options.instruction } : {}) };
    return this.http.json(chatPath(chatId, '/resume'), { method: 'POST', body });
  }

  approve(
    chatId: string,
    toolCallId: string,
    approved: boolean,
    note?: string,
  ): Promise<{ toolCallId: string; approved: boolean }> {
    const body = note ? { approved, note } : { approved };
    return this.http.json(chatPath(chatId, `/approvals/${id(toolCallId)}`), { method: 'POST', body });
  }

  answer(chatId: string, questionId: string, answer: string): Promise<{ questionId: string; answered: boolean }> {
    return this.http.json(chatPath(chatId, `/answers/${id(questionId)}`), { method: 'POST', body: { answer } });
  }

  branches(chatId: string, assistantId?: string): Promise<Branches> {
    return this.http.json(chatPath(chatId, `/branches${query({ assistantId })}`));
  }

  activateBranch(chatId: string, branchId: string, assistantId?: string): Promise<unknown> {
    const path = chatPath(chatId, `/branches/${id(branchId)}/activate${query({ assistantId })}`);
    return this.http.json(path, { method: 'POST', body: {} });
  }

  async chats(limit?: number): Promise<Chat[]> {
    return (await this.http.json<{ chats: Chat[] }>(`/api/chats${query({ limit })}`)).chats;
  }

  createChat(options: { title?: string; assistantIds?: string[]; defaultAssistantId?: string } = {}): Promise<Chat> {
    return this.http.json('/api/chats', { method: 'POST', body: options });
  }

  deleteChat(chatId: string): Promise<null> {
    return this.http.json(`/api/chats/${id(chatId)}`, { method: 'DELETE' });
  }

  deleteMessage(chatId: string, messageId: string): Promise<null> {
    return this.http.json(chatPath(chatId, `/messages/${id(messageId)}`), { method: 'DELETE' });
  }

  async assistants(): Promise<Assistant[]> {
    return (await this.http.json<{ assistants: Assistant[] }>('/api/assistants')).assistants;
  }

  async chatAssistants(chatId: string): Promise<ChatAssistant[]> {
    return (await this.http.json<{ assistants: ChatAssistant[] }>(`/api/chats/${id(chatId)}/assistants`)).assistants;
  }

  async addChatAssistant(chatId: string, assistantId: string, isDefault = false): Promise<ChatAssistant[]> {
    const body = isDefault ? { assistantId, default: true } : { assistantId };
    const path = `/api/chats/${id(chatId)}/assistants`;
    return (await this.http.json<{ assistants: ChatAssistant[] }>(path, { method: 'POST', body })).assistants;
  }

  async removeChatAssistant(chatId: string, assistantId: string): Promise<ChatAssistant[]> {
    const path = `/api/chats/${id(chatId)}/assistants/${id(assistantId)}`;
    return (await this.http.json<{ assistants: ChatAssistant[] }>(path, { method: 'DELETE' })).assistants;
  }

  usage(): Promise<Record<string, unknown>> {
    return this.http.json('/api/usage');
  }

  // Shared chats (docs/api.md#shared-chats).

  /** The chat's owner first, then its members as they joined; for anyone in the chat. */
  async members(chatId: string): Promise<Member[]> {
    return (await this.http.json<{ members: Member[] }>(`/api/chats/${id(chatId)}/members`)).members;
  }

  /** Adds an existing user, by id or e-mail, to the caller's chat (the owner's alone): the
   * member, whether just added or already in it. 404 `chat_or_user_not_found` for a chat not
   * the caller's and for an unknown user alike; 422 `too_many_members`. */
  addMember(chatId: string, who: NewMember): Promise<Member> {
    const body = who.userId !== undefined ? { userId: who.userId } : { email: who.email };
    return this.http.json(`/api/chats/${id(chatId)}/members`, { method: 'POST', body });
  }

  /** Removes a member (the owner), or leaves (a member removing themself). 403
   * `not_chat_owner`, 409 `owner_stays`, 404 `member_not_found`. */
  async removeMember(chatId: string, userId: string): Promise<void> {
    await this.http.json(`/api/chats/${id(chatId)}/members/${id(userId)}`, { method: 'DELETE' });
  }

  // An edit's cascade (docs/conversation-control.md#cascading-regeneration).

  /** Answers a cascade's card: approved, it regenerates the next batch; declined, the rest
   * stay as they are. 404 `cascade_not_found`, 409 `cascade_already_decided`. */
  decideCascade(chatId: string, cascadeId: string, approved: boolean): Promise<CascadeDecision> {
    const path = chatPath(chatId, `/cascades/${id(cascadeId)}/decision`);
    return this.http.json(path, { method: 'POST', body: { approved } });
  }

  /** Stops a cascade before its next regeneration. 404 `cascade_not_found` unless it runs or
   * waits. */
  cancelCascade(chatId: string, cascadeId: string): Promise<{ cascadeId: string; canceled: boolean }> {
    return this.http.json(chatPath(chatId, `/cascades/${id(cascadeId)}/cancel`), { method: 'POST', body: {} });
  }
}
