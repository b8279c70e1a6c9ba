// The branch switcher: shown while the chat has more than one branch (regenerate forks one).

import { controls, state } from './conversation.js';
import { aborted, els, formatTime, showComposerError, visibleText } from './page.js';

// Loaded again whenever the messages shown change (a fork adds a reply, a switch replaces them).
export function watchBranches() {
  const key = `${state.chatId}|${[...state.messages.values()]
    .map((message) => `${message.id}:${message.status}`)
    .join(',')}`;
  if (key === controls.branchesKey) return;
  if (!key.startsWith(`${controls.branchesKey.split('|')[0]}|`)) els.branches.hidden = true;
  controls.branchesKey = key;
  clearTimeout(controls.branchesTimer);
  controls.branchesTimer = setTimeout(loadBranches, 250);
}

// `original · 10:42: …answered: Berlin.`: the branch, when its latest message was written, and
// how that message ends (replies answered again begin alike and differ at the end).
function branchLabel(branch, index) {
  const latest = branch.latestMessage;
  const name = index === 0 ? 'original' : `version ${index + 1}`;
  if (!latest) return name;
  let preview = visibleText(latest.content.replace(/\s+/g, ' ').trim());
  if (preview.length > 28) preview = `…${preview.slice(-27)}`;
  return `${name} · ${formatTime(latest.createdAt)}: ${preview}`;
}

async function loadBranches() {
  const chatId = state.chatId;
  if (!state.session || !chatId || chatId === controls.leaving) return;
  const request = ++controls.branchesRequest;
  let body;
  try {
    body = await state.client.branches(chatId);
  } catch {
    return; // the switcher waits for the next change; the page says what else went wrong
  }
  if (request !== controls.branchesRequest || chatId !== state.chatId) return;
  controls.activeBranchId = body.activeBranchId;
  const select = els.branchSelect;
  select.replaceChildren(
    ...body.branches.map((branch, index) => {
      const option = document.createElement('option');
      option.value = branch.id;
      option.textContent = branchLabel(branch, index);
      option.selected = branch.id === body.activeBranchId;
      return option;
    }),
  );
  select.value = body.activeBranchId;
  els.branches.hidden = body.branches.length < 2;
  els.branches.dataset.activeBranchId = body.activeBranchId;
}

export async function activateBranch(branchId) {
  if (!state.chatId || branchId === controls.activeBranchId) return;
  const chatId = state.chatId;
  showComposerError('');
  els.branchSelect.disabled = true;
  // A list asked for before the switch, or while it is made, would put the old branch back in
  // the switcher: neither is shown.
  controls.branchesRequest += 1;
  try {
    await state.client.activateBranch(chatId, branchId);
    controls.branchesRequest += 1;
    controls.activeBranchId = branchId;
    els.branches.dataset.activeBranchId = branchId;
    els.branchSelect.value = branchId;
    // The history follows the active branch.
    if (chatId === state.chatId) await state.feed.refresh();
  } catch (error) {
    if (aborted(error)) return;
    showComposerError(`Could not switch branches: ${error.message}`);
    els.branchSelect.value = controls.activeBranchId;
  } finally {
    els.branchSelect.disabled = false;
  }
}
