// Server-Sent Events from a fetch body (EventSource cannot POST): each event's name and its data
// parsed as JSON; comments (the keepalives) skipped.
export async function* readSse(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let name = 'message';
    let data = [];
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (done)
                return;
            buffer += value;
            let end;
            while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
                const line = buffer.slice(0, end);
                buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
                if (line === '') {
                    if (data.length)
                        yield { event: name, data: JSON.parse(data.join('\n')) };
                    name = 'message';
                    data = [];
                }
                else if (!line.startsWith(':')) {
                    const colon = line.indexOf(':');
                    const field = colon < 0 ? line : line.slice(0, colon);
                    const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
                    if (field === 'event')
                        name = text;
                    else if (field === 'data')
                        data.push(text);
                }
            }
        }
    }
    finally {
        // A consumer that stops early (or an error) ends the request too.
        await reader.cancel().catch(() => { });
    }
}
