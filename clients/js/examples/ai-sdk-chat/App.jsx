import { useChat } from '@ai-sdk/react';
import { createClient } from '@supabase/supabase-js';
import { HandoffClient } from '@handoff/client';
import { HandoffChatTransport } from '@handoff/client/ai-sdk';
import { useEffect, useState } from 'react';

const HANDOFF_URL = 'http://127.0.0.1:8000';

// The dev server's session (the demo user's token, the project's anon key, the demo chat); on
// Supabase, sign in with supabase.auth instead and use the session's access token.
async function connect() {
  const session = await (await fetch(`${HANDOFF_URL}/api/dev/session`)).json();
  const supabase = createClient(HANDOFF_URL, session.anonKey, { accessToken: async () => session.token });
  const handoff = new HandoffClient({ url: HANDOFF_URL, supabase, accessToken: () => session.token });
  return { transport: new HandoffChatTransport(handoff), chatId: session.chatId };
}

function Chat({ transport, chatId }) {
  const { messages, sendMessage, status, stop } = useChat({ id: chatId, transport, resume: true });
  const [input, setInput] = useState('');
  return (
    <main>
      {messages.map((message) => (
        <p key={message.id}>
          <b>{message.role}:</b>{' '}
          {message.parts.map((part, i) =>
            part.type === 'text' ? <span key={i}>{part.text}</span> : null,
          )}
        </p>
      ))}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          sendMessage({ text: input });
          setInput('');
        }}
      >
        <input value={input} onChange={(event) => setInput(event.target.value)} />
        {status === 'streaming' ? <button onClick={stop}>Stop</button> : <button>Send</button>}
      </form>
    </main>
  );
}

export default function App() {
  const [connection, setConnection] = useState(null);
  useEffect(() => {
    connect().then(setConnection);
  }, []);
  return connection ? <Chat {...connection} /> : <p>Connecting…</p>;
}
