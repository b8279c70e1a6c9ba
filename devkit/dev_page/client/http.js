// Requests with the user's token: JSON routes and the turns' SSE streams. A 401 stored nothing
// (docs/api.md#errors): the token is asked for again, fresh, and the request sent once more.
import { errorOf, HandoffError, isAbort, unreachable } from './errors.js';
export class Http {
    url;
    getToken;
    fetchImpl;
    current = null;
    tokenListeners = new Set();
    constructor(url, accessToken, fetchImpl) {
        this.url = url.replace(/\/+$/, '');
        this.getToken = accessToken;
        this.fetchImpl = fetchImpl ?? ((input, init) => fetch(input, init));
    }
    /** The token to send; `refresh`: the last one was refused, ask for a fresh one (callers that
     * meet the same refusal together share one refresh). */
    token(refresh = false, refused) {
        if (this.current && !refresh)
            return this.current;
        if (this.current && refresh && refused !== undefined) {
            // Someone refreshed since this caller read its token: that one is already fresh.
            const pending = this.current;
            return pending.then((token) => (token === refused ? this.refreshNow() : token));
        }
        return refresh ? this.refreshNow() : this.load(false);
    }
    refreshNow() {
        return this.load(true);
    }
    load(refresh) {
        const loading = Promise.resolve(this.getToken({ refresh }));
        this.current = loading;
        loading.then((token) => {
            if (refresh)
                for (const listener of this.tokenListeners)
                    listener(token);
        }, () => {
            if (this.current === loading)
                this.current = null;
        });
        return loading;
    }
    /** Called with each token a refresh brings (the Realtime subscriptions take it). */
    onToken(listener) {
        this.tokenListeners.add(listener);
        return () => this.tokenListeners.delete(listener);
    }
    /** The response to an accepted request; throws the server's HandoffError otherwise. */
    async send(path, options = {}) {
        const { method = 'GET', body, signal, accept = 'application/json' } = options;
        const post = async (token) => {
            const headers = { Accept: accept, Authorization: `Bearer ${token}` };
            if (body !== undefined)
                headers['Content-Type'] = 'application/json';
            try {
                return await this.fetchImpl(`${this.url}${path}`, {
                    method,
                    headers,
                    body: body === undefined ? undefined : JSON.stringify(body),
                    signal: signal ?? null,
                });
            }
            catch (error) {
                if (isAbort(error))
                    throw new HandoffError(0, 'aborted', 'The request was aborted.');
                throw unreachable();
            }
        };
        const token = await this.token();
        let response = await post(token);
        if (response.status === 401) {
            await response.body?.cancel();
            response = await post(await this.token(true, token));
        }
        if (!response.ok)
            throw await errorOf(response);
        return response;
    }
    /** A JSON route's answer (null for 204). */
    async json(path, options = {}) {
        const response = await this.send(path, options);
        if (response.status === 204)
            return null;
        return (await response.json());
    }
}
