// The typed events of a reply, from its first token to its end, the same whether it was
// streamed here, handed off to the background, or joined after a reload.
/** A queue an async generator waits on: pushed from callbacks, ended with an error or not. */
export class Inbox {
    items = [];
    failure = null;
    wake = null;
    push(item) {
        this.items.push(item);
        this.wake?.();
    }
    fail(error) {
        this.failure = this.failure ?? error;
        this.wake?.();
    }
    /** The next item; throws the failure once the items before it are taken. */
    async next(signal) {
        for (;;) {
            const item = this.items.shift();
            if (item !== undefined)
                return item;
            if (this.failure)
                throw this.failure;
            if (signal?.aborted)
                throw signal.reason;
            await new Promise((resolve) => {
                this.wake = resolve;
                signal?.addEventListener('abort', () => resolve(), { once: true });
            });
            this.wake = null;
        }
    }
}
