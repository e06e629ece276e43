import { routes } from '../functions/tables';
import { httpHandler } from '../lib/http/handler';

/** GET /api/tables exactly as served, but without the license gate: the gate's baseline. */
const [listTables] = routes;
if (!listTables) throw new Error('functions/tables.ts has no routes');
export const handler = httpHandler([{ ...listTables, path: '/bench/ungated/tables' }], {
  licenseGate: false,
});
