// The reply statuses the page asks about: its copy of infra/store/statuses.py's sets (no build
// step to take them from there; tests/devkit/test_client_statuses.py holds them equal).

// A reply still being written, by the quick path or in the background.
// (`paused` keeps the chat's slot until it is resumed or canceled.)
export const ACTIVE = new Set(['queued', 'streaming', 'awaiting_approval', 'awaiting_input', 'paused']);
export const ENDED = new Set(['completed', 'error', 'canceled']);
