// The one error type the package throws and puts in streams: the server's JSON error
// (`{"error": {"code", "message"}}`, docs/api.md#errors) or the package's own codes.
export class HandoffError extends Error {
    name = 'HandoffError';
    /** The HTTP status; 0 when there was no answer. */
    status;
    /** The server's stable code, or one of `ClientErrorCode`. */
    code;
    constructor(status, code, message) {
        super(message);
        this.status = status;
        this.code = code;
    }
}
/** The error a non-2xx answer stands for, from its JSON body when it has one. */
export async function errorOf(response) {
    let code = `http_${response.status}`;
    let message = `The server answered ${response.status} ${response.statusText}.`.trim();
    try {
        const body = (await response.json());
        if (body?.error) {
            code = body.error.code || code;
            message = body.error.message || message;
        }
    }
    catch {
        // Not JSON: keep the status line.
    }
    return new HandoffError(response.status, code, message);
}
export const unreachable = () => new HandoffError(0, 'network', 'The server cannot be reached.');
export const gone = (why) => new HandoffError(0, 'server_gone', `The server went away while the reply was followed: ${why}`);
export function isAbort(error) {
    return error instanceof Error && error.name === 'AbortError';
}
