// A reply's timeline: the spans of its turn's trace as a waterfall (`handoff dev` keeps the last
// turns' traces in memory), and the reply's token usage.

import { state } from './conversation.js';
import { $, aborted } from './page.js';
import { ENDED_REPLY_STATUSES } from './statuses.js';

// While spans of the turn still run, the open timeline asks again, for a minute at most.
const TIMELINE_POLL_MS = 500;
const TIMELINE_POLLS = 120;

function formatMs(ms) {
  if (ms >= 1000) return `${(ms / 1000).toFixed(ms >= 10000 ? 1 : 2)} s`;
  if (ms >= 10) return `${Math.round(ms)} ms`;
  return `${ms.toFixed(1)} ms`;
}

function usageText(usage) {
  if (!usage || typeof usage.input !== 'number') return 'Usage: not recorded yet.';
  const calls = Array.isArray(usage.rounds) ? usage.rounds.length : 0;
  const over = calls === 0 ? '' : calls === 1 ? ', in one model call' : `, in ${calls} model calls`;
  return `Usage: ${usage.input} tokens in, ${usage.output} out${over}.`;
}

function timelineOf(id) {
  let entry = state.timelines.get(id);
  if (!entry) {
    entry = { open: false, request: 0, polls: 0, timer: null, ended: false };
    state.timelines.set(id, entry);
  }
  return entry;
}

export function wireTimeline(node) {
  const button = $('timeline-toggle', node);
  const panel = $('timeline-panel', node);
  panel.id = `timeline-${node.dataset.messageId}`;
  button.setAttribute('aria-controls', panel.id);
  button.addEventListener('click', () => {
    const entry = timelineOf(node.dataset.messageId);
    entry.open = !entry.open;
    button.setAttribute('aria-expanded', String(entry.open));
    panel.hidden = !entry.open;
    node.dataset.timeline = entry.open ? 'open' : 'closed';
    clearTimeout(entry.timer);
    entry.request += 1; // an answer still on its way is for a panel since closed
    if (entry.open) {
      entry.polls = 0;
      loadTimeline(node, entry);
    }
  });
}

export function renderTimeline(node, message) {
  const box = $('timeline', node);
  box.hidden = message.role !== 'assistant';
  if (box.hidden) return;
  const usage = $('timeline-usage', node);
  const text = usageText(message.usage);
  if (usage.textContent !== text) usage.textContent = text;
  // A reply that ended while its timeline was open: its last steps are in the trace now.
  const entry = state.timelines.get(message.id);
  if (entry && entry.open && !entry.ended && ENDED_REPLY_STATUSES.includes(message.status)) {
    clearTimeout(entry.timer);
    entry.polls = 0;
    loadTimeline(node, entry);
  }
}

async function loadTimeline(node, entry) {
  const id = node.dataset.messageId;
  const request = ++entry.request;
  const message = state.messages.get(id);
  entry.ended = Boolean(message && ENDED_REPLY_STATUSES.includes(message.status));
  const panel = $('timeline-panel', node);
  if (!panel.dataset.state) {
    panel.dataset.state = 'loading';
    $('timeline-summary', panel).textContent = 'Loading the timeline…';
  }
  let body;
  try {
    body = await state.connection.timeline(id);
  } catch (error) {
    if (request !== entry.request || aborted(error)) return;
    panel.dataset.state = 'error';
    $('timeline-summary', panel).textContent = error.message;
    $('waterfall', panel).hidden = true;
    return;
  }
  if (request !== entry.request) return;
  renderWaterfall(panel, body);
  if (body.runningSpans > 0 && entry.polls < TIMELINE_POLLS) {
    entry.polls += 1;
    entry.timer = setTimeout(() => {
      if (entry.open && node.isConnected) loadTimeline(node, entry);
    }, TIMELINE_POLL_MS);
  }
}

function spanKind(span) {
  if (span.depth === 0) return 'turn';
  if (span.attempt !== null && span.attempt !== undefined) return 'step';
  if (span.model) return 'model';
  return 'work';
}

function spanMark(kind, text) {
  const mark = document.createElement('span');
  mark.className = `span-mark span-mark-${kind}`;
  mark.dataset.testid = 'span-mark';
  mark.textContent = text;
  return mark;
}

function spanRow(span, total) {
  const failed = span.error !== null && span.error !== undefined;
  const retry = (span.attempt ?? 0) > 0;
  const row = document.createElement('tr');
  row.className = `span-row span-kind-${spanKind(span)}`;
  row.classList.toggle('span-failed', failed);
  row.classList.toggle('span-retry', retry);
  row.dataset.testid = 'span-row';
  row.dataset.depth = String(span.depth);

  const name = document.createElement('th');
  name.scope = 'row';
  name.className = 'span-name';
  name.style.paddingInlineStart = `${0.4 + span.depth * 1.2}em`;
  const label = document.createElement('span');
  label.className = 'span-label';
  label.dataset.testid = 'span-name';
  label.textContent = span.name;
  name.append(label);
  // A step's attempt counts from 0: attempt 1 is its first retry.
  // (spaces between the parts, for the row read as text)
  if (retry) name.append(' ', spanMark('retry', `retry ${span.attempt}`));
  if (failed) name.append(' ', spanMark('failed', 'failed'));
  const details = [];
  if (failed) details.push(span.error);
  if (span.inputTokens !== null && span.inputTokens !== undefined) {
    details.push(`${span.inputTokens} in · ${span.outputTokens ?? 0} out tokens`);
  }
  if (details.length) {
    const detail = document.createElement('span');
    detail.className = 'span-detail';
    detail.textContent = details.join(' · ');
    name.append(' ', detail);
  }

  const when = document.createElement('td');
  when.className = 'span-when';
  const at = document.createElement('span');
  at.className = 'visually-hidden';
  at.textContent = `starts at ${formatMs(span.startMs)}`;
  const track = document.createElement('div');
  track.className = 'span-track';
  track.setAttribute('aria-hidden', 'true');
  const bar = document.createElement('div');
  bar.className = 'span-bar';
  bar.dataset.testid = 'span-bar';
  // (a bar too short to see is drawn 2px wide, and still ends inside its track)
  bar.style.left = `min(${Math.min(100, (span.startMs / total) * 100)}%, 100% - 2px)`;
  bar.style.width = `${Math.min(100, (span.durationMs / total) * 100)}%`;
  bar.title = `${span.name}: from ${formatMs(span.startMs)} to ${formatMs(span.startMs + span.durationMs)}`;
  track.append(bar);
  when.append(at, track);

  const took = document.createElement('td');
  took.className = 'span-took';
  took.dataset.testid = 'span-took';
  took.textContent = formatMs(span.durationMs);
  row.append(name, when, took);
  return row;
}

function renderWaterfall(panel, body) {
  const table = $('waterfall', panel);
  const total = Math.max(body.durationMs, 0.001);
  table.tBodies[0].replaceChildren(...body.spans.map((span) => spanRow(span, total)));
  table.hidden = body.spans.length === 0;
  const count = body.spans.length;
  const parts = [`${count} ${count === 1 ? 'span' : 'spans'} over ${formatMs(body.durationMs)}`];
  if (body.droppedSpans) parts.push(`${body.droppedSpans} more not kept`);
  if (body.runningSpans) parts.push(`${body.runningSpans} still running…`);
  $('timeline-summary', panel).textContent = `${parts.join(' · ')}.`;
  panel.dataset.state = body.runningSpans ? 'running' : 'done';
}
