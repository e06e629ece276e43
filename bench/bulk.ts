/**
 * Bringing a million rows in and taking them all out (issue 26), for npm run bench:data: through
 * the host next to PostgreSQL's own COPY over one pg connection, in alternating rounds.
 *  - import: a 1,000,000-row CSV (about 30 MB) sent in 5 MiB parts (POST .../imports, PUT each part,
 *    POST .../commit) next to COPY ... FROM STDIN of the same bytes;
 *  - full export: the 1M-row table as CSV, page after page of 10,000 rows by `after` (the way the
 *    console and scripts take a whole table) next to COPY (SELECT ... ORDER BY id) TO STDOUT.
 * The host's memory is sampled before and after each, to show it stays flat.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { atLeast, type Host, type MemorySample, median, sampleMemory, shown, type Target } from './support';

const ROWS = 1_000_000;
const PART_BYTES = 5 * 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_BULK_ROUNDS ?? 3);

export const BULK = {
  copyIn: 'COPY FROM STDIN of the CSV, one pg connection (baseline)',
  importParts: 'import through the host, 5 MiB parts, then commit',
  copyOut: 'COPY (SELECT ... ORDER BY id) TO STDOUT, one pg connection (baseline)',
  exportPages: 'full export through the host, CSV pages of 10,000 by after',
};

function csvOfRows(): Buffer {
  const lines = ['id,name,qty,price'];
  for (let i = 1; i <= ROWS; i++)
    lines.push(`${i},"item ${i}, size ${i % 7}",${i % 1000},${(i / 100).toFixed(2)}`);
  return Buffer.from(`${lines.join('\n')}\n`);
}

const TABLE =
  'CREATE TABLE IF NOT EXISTS bench.imported (id int PRIMARY KEY, name text, qty int, price numeric(10,2))';

async function copyIn(client: pg.Client, csv: Buffer) {
  await client.query('TRUNCATE bench.imported');
  const stream = client.query(copyFrom('COPY bench.imported FROM STDIN WITH (FORMAT csv, HEADER true)'));
  await new Promise<void>((done, fail) => {
    stream.on('finish', done).on('error', fail);
    for (let at = 0; at < csv.length; at += 1024 * 1024) stream.write(csv.subarray(at, at + 1024 * 1024));
    stream.end();
  });
}

async function importParts(
  api: (path: string) => string,
  headers: Record<string, string>,
  client: pg.Client,
  csv: Buffer,
) {
  await client.query('TRUNCATE bench.imported');
  const opened = await fetch(api('/api/table/imported/imports'), {
    method: 'POST',
    headers,
    body: JSON.stringify({ schema: 'bench', format: 'csv' }),
  });
  if (opened.status !== 201) throw new Error(`open: ${opened.status} ${await opened.text()}`);
  const { id } = (await opened.json()) as { id: string };
  let parts = 0;
  for (let at = 0; at < csv.length; at += PART_BYTES) {
    parts++;
    const sent = await fetch(api(`/api/table/imported/imports/${id}/parts/${parts}?schema=bench`), {
      method: 'PUT',
      headers: { authorization: headers.authorization as string, 'content-type': 'text/csv' },
      body: csv.subarray(at, at + PART_BYTES),
    });
    if (!sent.ok) throw new Error(`part ${parts}: ${sent.status} ${await sent.text()}`);
  }
  const committed = await fetch(api(`/api/table/imported/imports/${id}/commit`), {
    method: 'POST',
    headers,
    body: JSON.stringify({ schema: 'bench', parts }),
  });
  const outcome = (await committed.json()) as { rows?: number };
  if (outcome.rows !== ROWS) throw new Error(`commit: ${committed.status} ${JSON.stringify(outcome)}`);
}

async function copyOut(client: pg.Client): Promise<number> {
  let bytes = 0;
  const sql = 'COPY (SELECT * FROM bench.rows_1m ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER true)';
  for await (const chunk of client.query(copyTo(sql))) bytes += (chunk as Buffer).length;
  return bytes;
}

async function exportPages(api: (path: string) => string, headers: Record<string, string>): Promise<number> {
  let bytes = 0;
  let rows = 0;
  let after: string | null = null;
  do {
    const query: string = `schema=bench&format=csv&limit=10000${after ? `&header=false&after=${encodeURIComponent(after)}` : ''}`;
    const response = await fetch(api(`/api/table/rows_1m/export?${query}`), {
      headers: { ...headers, 'accept-encoding': 'identity' },
    });
    if (!response.ok) throw new Error(`export page: ${response.status} ${await response.text()}`);
    const text = await response.text();
    bytes += text.length;
    // Counted natively (indexOf): the baseline only counts bytes, and a split would weigh on ours.
    for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) rows++;
    after = response.headers.get('x-next-cursor');
  } while (after);
  if (rows !== ROWS + 1) throw new Error(`full export: ${rows} lines`);
  return bytes;
}

/** Each target's median wall time over ROUNDS alternating rounds. */
async function rounds(targets: Record<string, () => Promise<unknown>>) {
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
  for (let i = 0; i < ROUNDS; i++) {
    for (const [name, run] of Object.entries(targets)) {
      const started = performance.now();
      await run();
      times[name]?.push(performance.now() - started);
    }
  }
  return Object.fromEntries(Object.entries(times).map(([name, runs]) => [name, median(runs)]));
}

export async function bulk(
  api: (path: string) => string,
  headers: Record<string, string>,
  client: pg.Client,
  host: Host,
  memory: MemorySample[],
): Promise<Record<string, number>> {
  await client.query(TABLE);
  const csv = csvOfRows();
  console.log(`import file: ${ROWS.toLocaleString()} rows, ${(csv.length / 1024 / 1024).toFixed(1)} MB`);
  memory.push(sampleMemory('before the imports', host));
  const imported = await rounds({
    [BULK.copyIn]: () => copyIn(client, csv),
    [BULK.importParts]: () => importParts(api, headers, client, csv),
  });
  memory.push(sampleMemory(`after ${ROUNDS} imports of 1M rows`, host));
  const exported = await rounds({
    [BULK.copyOut]: () => copyOut(client),
    [BULK.exportPages]: () => exportPages(api, headers),
  });
  memory.push(sampleMemory(`after ${ROUNDS} full exports of 1M rows`, host));
  return { ...imported, ...exported };
}

export function printBulk(medians: Record<string, number>) {
  console.log(`A million rows in and out, sequential, median of ${ROUNDS} alternating rounds`);
  const rate = (baseline: string, name: string) => (medians[baseline] ?? 0) / (medians[name] ?? 1);
  console.table(
    Object.entries(medians).map(([what, ms]) => ({
      what,
      s: Number((ms / 1000).toFixed(2)),
      'rows/s': Math.round(ROWS / (ms / 1000)),
      'vs COPY': `${(what.includes('import') || what.includes('FROM') ? rate(BULK.copyIn, what) : rate(BULK.copyOut, what)).toFixed(2)}x`,
    })),
  );
}

/** Issue 26: import and full export at least 0.3x PostgreSQL's own COPY, in rows a second. */
export function bulkTargets(medians: Record<string, number>): Target[] {
  const vs = (baseline: string, name: string) => (medians[baseline] ?? 0) / (medians[name] ?? 1);
  return [
    atLeast('import of 1M rows in parts vs COPY FROM STDIN', vs(BULK.copyIn, BULK.importParts), 0.3),
    atLeast('full export of 1M rows by cursor vs COPY TO STDOUT', vs(BULK.copyOut, BULK.exportPages), 0.3),
    shown('rows of the import file', ROWS, ' rows'),
  ];
}
