/**
 * A result that is a file rather than JSON data (CSV export, a backup's part); lib/http sends it
 * as an attachment, or inline when it has no file name (the metrics). Bytes travel as base64, as
 * API Gateway carries binary answers.
 */
export class Download {
  constructor(
    readonly body: string | Buffer,
    readonly contentType: string,
    readonly filename: string | undefined,
    /** Further headers of the answer (an export's X-Next-Cursor). */
    readonly headers: Record<string, string> = {},
  ) {}
}
