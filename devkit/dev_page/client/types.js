// The shapes the API answers and the package hands out (docs/api.md, docs/conversation-control.md).
/** A reply whose turn goes on: drafts may still come, a cancel still ends it. */
export const LIVE_REPLY_STATUSES = Object.freeze([
    'queued',
    'streaming',
    'awaiting_approval',
    'awaiting_input',
    'paused',
]);
/** A reply that stays as it is. */
export const ENDED_REPLY_STATUSES = Object.freeze([
    'completed',
    'error',
    'canceled',
]);
export const isLive = (status) => LIVE_REPLY_STATUSES.includes(status);
export const isEnded = (status) => ENDED_REPLY_STATUSES.includes(status);
