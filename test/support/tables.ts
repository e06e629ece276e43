import { handler as schemas } from '#functions/schemas';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/** A fresh schema made through the API, so tests never see each other's tables. */
export async function freshSchema(prefix = 'tbl'): Promise<string> {
  const name = uniqueName(prefix);
  const reply = await call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName: name, password: 'schema-pass-1' },
  });
  if (reply.status !== 201) throw new Error(`could not create schema ${name}: ${reply.text}`);
  return name;
}
