/**
 * The console's import (console/src/transfer/transfer.ts) when a commit's answer never comes (the
 * network, the service restarted under it): the import's state says what became of the commit,
 * and the console follows it instead of abandoning the import and its parts. The service is a
 * fake fetch here, answering as lib/admin/import-sessions does.
 */

interface Sent {
  method: string;
  url: string;
}

// The signals the page shares (ESM only, which Jest does not load here): plain boxes do.
jest.mock('@preact/signals', () => ({
  signal: <T>(value: T) => ({
    value,
    peek() {
      return this.value;
    },
  }),
}));
// Its signature, not its type: the console's modules are checked with the DOM (console/tsconfig).
type ImportFile = (
  file: Blob,
  where: { schema: string; table: string },
  options: { format: 'csv'; mode: 'insert'; header: boolean; delimiter: string },
  onProgress: (sentBytes: number) => void,
  signal: AbortSignal,
) => Promise<unknown>;
const { importFile } = require('../../console/src/transfer/transfer') as { importFile: ImportFile };

const OUTCOME = { success: true, message: '2 rows imported into "items"', rows: 2, mode: 'insert' };
const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

/** A fake service: `answers` in turn for each commit and each read of the import's state. */
function service(commits: (() => Response)[], reads: unknown[]): Sent[] {
  const sent: Sent[] = [];
  globalThis.fetch = (async (url: string, init: RequestInit) => {
    const method = init.method ?? 'GET';
    sent.push({ method, url });
    if (method === 'POST' && url.endsWith('/imports')) return json(201, { id: 'i1' });
    if (method === 'PUT') return json(200, { part: 1 });
    if (method === 'POST' && url.endsWith('/commit')) return (commits.shift() as () => Response)();
    if (method === 'GET') return json(200, reads.shift());
    return json(200, { success: true });
  }) as typeof fetch;
  return sent;
}

const lost = () => {
  throw new TypeError('fetch failed');
};

const run = () =>
  importFile(
    new Blob(['id,name\n1,Ann\n2,Bo\n']),
    { schema: 's', table: 'items' },
    { format: 'csv', mode: 'insert', header: true, delimiter: ',' },
    () => undefined,
    new AbortController().signal,
  );

const kinds = (sent: Sent[]) => sent.map((s) => `${s.method} ${s.url.replace(/\?.*/, '')}`);

describe('the console’s import, when a commit’s answer never comes', () => {
  it('commits again when the import reads open again (the commit was interrupted, nothing written)', async () => {
    const sent = service([lost, () => json(200, OUTCOME)], [{ state: 'open', message: 'interrupted' }]);

    const done = await run();

    expect(done).toEqual(OUTCOME);
    expect(kinds(sent)).toEqual([
      'POST api/table/items/imports',
      'PUT api/table/items/imports/i1/parts/1',
      'POST api/table/items/imports/i1/commit',
      'GET api/table/items/imports/i1',
      'POST api/table/items/imports/i1/commit',
    ]);
  });

  it('answers the outcome when the import reads committed, and neither commits again nor abandons it', async () => {
    const sent = service([lost], [{ state: 'committed', outcome: OUTCOME }]);

    const done = await run();

    expect(done).toEqual(OUTCOME);
    expect(kinds(sent).filter((k) => k.startsWith('POST') || k.startsWith('DELETE'))).toEqual([
      'POST api/table/items/imports',
      'POST api/table/items/imports/i1/commit',
    ]);
  });

  it('abandons the import, as before, when the commit is refused (a bad value)', async () => {
    const sent = service([() => json(400, { error: 'Import failed', message: 'line 2' })], []);

    await expect(run()).rejects.toThrow('line 2');
    expect(kinds(sent).at(-1)).toBe('DELETE api/table/items/imports/i1');
    expect(kinds(sent)).not.toContain('GET api/table/items/imports/i1');
  });
});
