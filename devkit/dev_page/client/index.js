export { ChatSession } from './chat.js';
export { createHandoffClient, HandoffClient } from './client.js';
export { HandoffError } from './errors.js';
export { completeMention, matchingAssistants, mentionAt } from './mentions.js';
export { readSse } from './sse.js';
export * from './types.js';
