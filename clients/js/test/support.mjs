// What every test of the package needs: the `handoff dev` the Python test started (its URL,
// the banner's token, the secret its tokens are signed with), a supabase-js client pointed at it
// (Node 20 has no WebSocket of its own: `ws`), and a HandoffClient made as a frontend makes one.

import { createHmac } from 'node:crypto';

import { createClient } from '@supabase/supabase-js';
import WebSocket from 'ws';

import { HandoffClient } from '../dist/index.js';

export const URL_ = process.env.HANDOFF_URL;
export const TOKEN = process.env.HANDOFF_TOKEN;
export const SECRET = process.env.HANDOFF_JWT_SECRET;
if (!URL_ || !TOKEN || !SECRET) {
  throw new Error('Run through tests/clients/test_js_client.py: HANDOFF_URL, HANDOFF_TOKEN, HANDOFF_JWT_SECRET.');
}

const b64 = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** The banner token's claims. */
export const CLAIMS = JSON.parse(Buffer.from(TOKEN.split('.')[1], 'base64url').toString());

/** A token of the demo user that expires in `seconds`, signed as the dev server signs its own. */
export function mint(seconds) {
  const now = Math.floor(Date.now() / 1000);
  const payload = { ...CLAIMS, iat: now, exp: now + seconds };
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(payload)}`;
  return `${head}.${createHmac('sha256', SECRET).update(head).digest('base64url')}`;
}

let anonKey = null;
async function projectKey() {
  if (!anonKey) {
    const response = await fetch(`${URL_}/api/dev/session`);
    anonKey = (await response.json()).anonKey;
  }
  return anonKey;
}

/** A client as a page makes it after a load: its own supabase-js client and token source.
 * `tokens.next`: what the token function answers (the banner's token by default); every call
 * is counted in `tokens.calls`. */
export async function makeClient(options = {}) {
  const tokens = { current: options.token ?? TOKEN, calls: [], fresh: options.fresh ?? (() => TOKEN) };
  const accessToken = async ({ refresh } = { refresh: false }) => {
    tokens.calls.push(refresh);
    if (refresh) tokens.current = tokens.fresh();
    return tokens.current;
  };
  const supabase = createClient(URL_, await projectKey(), {
    // The user's token to Realtime too, at every join and heartbeat (else supabase-js would
    // send the anon key in its place).
    accessToken: async () => tokens.current,
    realtime: { transport: WebSocket },
    auth: { persistSession: false, autoRefreshToken: false },
  });
  const client = new HandoffClient({ url: URL_, supabase, accessToken, ...options.client });
  const close = async () => {
    await client.close();
    await supabase.removeAllChannels();
    supabase.realtime.disconnect();
  };
  return { client, supabase, tokens, close };
}

/** A new chat of the demo user's. */
export async function newChat(client) {
  return (await client.createChat({ title: 'js client test' })).id;
}

/** Every event of a reply stream, and the text its deltas add up to. */
export async function collect(stream, onEvent = () => {}) {
  const events = [];
  let text = '';
  for await (const event of stream) {
    events.push({ ...event, at: Date.now() });
    if (event.type === 'text') text += event.delta;
    await onEvent(event, events);
  }
  return { events, text, finish: events.at(-1) };
}

/** The stored message, through the API. */
export async function stored(client, chatId, messageId) {
  const history = await client.history(chatId, { all: true });
  return history.messages.find((m) => m.id === messageId);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A token of another user (`sub`, `email`), signed as the dev server signs its own. */
export function mintFor(user, seconds = 3600) {
  const now = Math.floor(Date.now() / 1000);
  const payload = { ...CLAIMS, sub: user.id, email: user.email, iat: now, exp: now + seconds };
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(payload)}`;
  return `${head}.${createHmac('sha256', SECRET).update(head).digest('base64url')}`;
}

/** The users besides the demo user that the Python test made (HANDOFF_USER_<n>_ID, …_EMAIL). */
export function otherUsers() {
  const users = [];
  for (let n = 1; process.env[`HANDOFF_USER_${n}_ID`]; n += 1) {
    users.push({ id: process.env[`HANDOFF_USER_${n}_ID`], email: process.env[`HANDOFF_USER_${n}_EMAIL`] });
  }
  return users;
}

/** A client signed in as `user`, as that person's page makes it. */
export function clientAs(user) {
  const token = mintFor(user);
  return makeClient({ token, fresh: () => mintFor(user) });
}

/** Resolves with `pick(snapshot)` once it is truthy, as the chat's subscribers see it;
 * rejects after `ms` with what was last seen. */
export function until(chat, pick, ms = 20_000) {
  return new Promise((resolve, reject) => {
    let stop = () => {};
    const check = () => {
      const found = pick(chat.snapshot());
      if (found) {
        stop();
        clearTimeout(timer);
        resolve(found);
      }
    };
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`not seen within ${ms} ms: ${JSON.stringify(chat.snapshot()).slice(0, 2000)}`));
    }, ms);
    stop = chat.subscribe(check);
    check();
  });
}
