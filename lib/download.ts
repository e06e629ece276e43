/**
 * A result that is a file rather than JSON data (CSV export); lib/http sends it as an attachment,
 * or inline when it has no file name (the metrics).
 */
export class Download {
  constructor(
    readonly body: string,
    readonly contentType: string,
    readonly filename: string | undefined,
    /** Further headers of the answer (an export's X-Next-Cursor). */
    readonly headers: Record<string, string> = {},
  ) {}
}
