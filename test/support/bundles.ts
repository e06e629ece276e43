import { handler as schemas } from '#functions/schemas';
import { type Call, call, type Reply } from '#test/support/http';

/** A tenant's bundle as a client handles it: backed up and downloaded, then sent back as a restore. */

const JSON_TYPE = { 'content-type': 'application/json' };

/** Backs the schema up (as the admin, or as `as` says) and downloads its manifest and parts. */
export async function backUp(schema: string, as: Partial<Call> = {}) {
  const made = await call(schemas, {
    method: 'POST',
    path: '/api/backups',
    query: { schema },
    ...as,
    headers: { ...JSON_TYPE, ...as.headers },
  });
  expect([made.status, made.body.message]).toEqual([201, undefined]);
  const id = made.body.id as string;
  const manifest = (await call(schemas, { path: `/api/backups/${id}`, query: { schema } })).body;
  const parts: Buffer[] = [];
  for (let n = 1; n <= manifest.parts.length; n++) {
    const part = await call(schemas, { path: `/api/backups/${id}/parts/${n}`, query: { schema } });
    expect(part.status).toBe(200);
    parts.push(part.bytes);
  }
  return { id, made: made.body, manifest, parts };
}

export const openRestore = (schema: string, mode: string, manifest: unknown) =>
  call(schemas, { method: 'POST', path: '/api/restores', body: { schema, mode, manifest } });

export const putPart = (schema: string, id: string, n: number, body: Buffer): Promise<Reply> =>
  call(schemas, {
    method: 'PUT',
    path: `/api/restores/${id}/parts/${n}`,
    query: { schema },
    headers: { 'content-type': 'application/octet-stream' },
    body,
  });

/** Opens a restore and sends its parts, last first (any order will do): its id. */
export async function sendRestore(
  schema: string,
  mode: 'new' | 'replace',
  manifest: unknown,
  parts: Buffer[],
) {
  const opened = await openRestore(schema, mode, manifest);
  expect([opened.status, opened.body.message]).toEqual([201, undefined]);
  const id = opened.body.id as string;
  for (let n = parts.length; n >= 1; n--) {
    const sent = await putPart(schema, id, n, parts[n - 1] as Buffer);
    expect([sent.status, sent.body.message]).toEqual([200, undefined]);
  }
  return id;
}

export const commit = (schema: string, id: string, password?: string) =>
  call(schemas, {
    method: 'POST',
    path: `/api/restores/${id}/commit`,
    body: { schema, ...(password && { password }) },
  });
