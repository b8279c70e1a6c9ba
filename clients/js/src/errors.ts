// The one error type the package throws and puts in streams: the server's JSON error
// (`{"error": {"code", "message"}}`, docs/api.md#errors) or the package's own codes.

/** The package's own codes, beside the server's (`chat_not_found`, `job_in_progress`, …). */
export type ClientErrorCode =
  /** The server could not be reached at all. */
  | 'network'
  /** The server went away while a reply was followed (a stream cut short, the feed and the
   * history unreachable for longer than `serverGoneAfterMs`). */
  | 'server_gone'
  /** The request was aborted by its signal. */
  | 'aborted';

export class HandoffError extends Error {
  override readonly name = 'HandoffError';
  /** The HTTP status; 0 when there was no answer. */
  readonly status: number;
  /** The server's stable code, or one of `ClientErrorCode`. */
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The error a non-2xx answer stands for, from its JSON body when it has one. */
export async function errorOf(response: Response): Promise<HandoffError> {
  let code = `http_${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}.`.trim();
  try {
    const body = (await response.json()) as { error?: { code?: string; message?: string } };
    if (body?.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // Not JSON: keep the status line.
  }
  return new HandoffError(response.status, code, message);
}

export const unreachable = (): HandoffError =>
  new HandoffError(0, 'network', 'The server cannot be reached.');

export const gone = (why: string): HandoffError =>
  new HandoffError(0, 'server_gone', `The server went away while the reply was followed: ${why}`);

export function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}
