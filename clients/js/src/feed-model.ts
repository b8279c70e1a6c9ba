// What a chat's feed is given and says: the supabase-js client it joins channels with, the
// model it keeps up to date (the package's ChatState, or a frontend's own), its options, and
// the listener it tells what it observes.

import type { SupabaseClient } from '@supabase/supabase-js';

import type { HandoffError } from './errors.js';
import type { DraftChange, MessageRow } from './state.js';
import type { ChatMessage, HistoryMessage, PendingCascade } from './types.js';

/** The part of a supabase-js client the package uses: Realtime's channels. */
export type RealtimeHost = Pick<SupabaseClient<any, any, any>, 'channel' | 'removeChannel' | 'realtime'>;

/** `unavailable`: Realtime cannot follow this database (no logical decoding); the history is
 * polled instead, for as long as the feed is open. */
export type FeedStatus = 'connecting' | 'live' | 'down' | 'unavailable';

export interface FeedListener {
  /** Messages that changed (every message after a history load). */
  changed(messages: ChatMessage[]): void;
  /** The feed's status; with `unavailable`, the server's words for why. */
  status?(status: FeedStatus, detail?: string): void;
  gone?(error: HandoffError): void;
  /** The history was loaded (the cascades' cards with it). */
  loaded?(): void;
  /** A history load failed (the server away, a refusal); the feed tries again by itself. */
  failed?(error: unknown): void;
}

/** What a feed keeps up to date: the package's ChatState, or a frontend's own model with the
 * same methods. */
export interface FeedModel {
  /** The stored history in place of what is held (`cascades`: the cards waiting). */
  history(messages: HistoryMessage[], cascades: PendingCascade[]): void;
  /** A stored row: the message it changed, or null when nothing shown changed. */
  row(row: MessageRow): ChatMessage | null;
  /** A draft: the message it moved on, null when it was old news, 'gap' when changes were
   * missed (the feed loads the history again). */
  draft(change: DraftChange): ChatMessage | null | 'gap';
  get(id: string): ChatMessage | undefined;
  /** The messages shown, in the chat's order. */
  list(): ChatMessage[];
  /** The cascades' cards waiting for the editor. */
  readonly cascades: readonly unknown[];
}

export interface FeedOptions {
  pollMs: number;
  rejoinMs: number;
  serverGoneAfterMs: number;
  /** The history of every branch (`?all=true`): the stale messages something replaced too. */
  allBranches?: boolean;
}
