import pg from 'pg';

/**
 * A caller's statement as pg runs it, but for `COPY ... FROM STDIN`: the rows it waits for have
 * no way in through the SQL route, so it is refused, whichever protocol sent it. Sent alone
 * (extended protocol), its Sync reached PostgreSQL while it waited in COPY and was ignored: the
 * refusal sends one of its own, or the session would wait in COPY for good, its transaction and
 * locks held and the request unanswered.
 */

/** What PostgreSQL's error carries ("COPY from stdin failed: ..."), for queryError to recognise. */
export const COPY_IN_REFUSED = 'COPY FROM STDIN cannot be fed through the SQL route';

interface Protocol {
  requiresPreparation(): boolean;
}

export class CallerQuery extends pg.Query {
  handleCopyInResponse(connection: pg.Connection & { sendCopyFail(message: string): void; sync(): void }) {
    connection.sendCopyFail(COPY_IN_REFUSED);
    if ((this as unknown as Protocol).requiresPreparation()) connection.sync();
  }
}

/** The refusal's error from PostgreSQL (SQLSTATE 57014, as a cancel). */
export const isCopyInRefused = (error: { code?: string; message?: string }) =>
  error.code === '57014' && (error.message ?? '').includes(COPY_IN_REFUSED);
