import { useState } from 'preact/hooks';
import { answer, saveFile } from '../api';
import { shownText } from '../time-zone';
import { ErrorText, useAction } from '../ui';

/**
 * The SQL page's answer: one tab per statement of the script (its command, rows and time), the
 * last one open, and its rows in a grid. A query stopped at the rows shown says so.
 */

export interface StatementResult {
  command: string | null;
  /** null: a query stopped at the rows shown, its count unknown. */
  rowCount: number | null;
  rows: Record<string, unknown>[];
  fields: { name: string; dataTypeID: number }[];
  truncated: boolean;
  /** null: sent in one round trip with the next statements, whose last one has the time. */
  duration: number | null;
}

/** The rows shown a statement may have: the choices offered, and the one a person starts with. */
export const ROWS_SHOWN = [100, 1000, 5000, 10000];
export const DEFAULT_ROWS_SHOWN = 1000;

const plural = (n: number, word: string) => `${n.toLocaleString()} ${word}${n === 1 ? '' : 's'}`;

/** What a statement did, in a few words: "SELECT · 1,000+ rows", "UPDATE · 2 rows", "CREATE". */
export function describeResult(result: StatementResult): string {
  const command = result.command ?? 'Statement';
  if (result.rowCount === null && result.truncated)
    return `${command} · ${plural(result.rows.length, 'row')}+`;
  if (result.rowCount === null)
    return result.fields.length ? `${command} · ${plural(result.rows.length, 'row')}` : command;
  return `${command} · ${plural(result.rowCount, 'row')}`;
}

/** A one-query script, whose every row can be exported (POST /api/query/export). */
export interface Exportable {
  sql: string;
  schema: string;
}

/** Every row of the query as a CSV file, page after page joined into one (X-Next-Offset). */
function ExportAll({ query }: { query: Exportable }) {
  const save = useAction(async () => {
    const parts: Blob[] = [];
    let offset: number | undefined = 0;
    while (offset !== undefined) {
      const reply = await answer('POST', 'query/export', {
        body: { ...query, format: 'csv', offset, header: offset === 0 },
      });
      parts.push(await reply.blob());
      const next = reply.headers.get('x-next-offset');
      offset = next === null ? undefined : Number(next);
    }
    saveFile(new Blob(parts, { type: 'text/csv' }), 'query.csv');
  });
  return (
    <>
      <button type="button" onClick={() => save.run()} disabled={save.busy}>
        {save.busy ? 'Exporting…' : 'Export every row as CSV'}
      </button>
      <ErrorText error={save.error} />
    </>
  );
}

export function ResultTabs({ results, exportable }: { results: StatementResult[]; exportable?: Exportable }) {
  const [open, setOpen] = useState(results.length - 1);
  const shown = results[Math.min(open, results.length - 1)];
  return (
    <div class="results">
      {results.length > 1 && (
        <div class="tabs" role="tablist" aria-label="Statements">
          {results.map((result, index) => (
            <button
              key={index}
              type="button"
              role="tab"
              class="link"
              aria-selected={index === open}
              onClick={() => setOpen(index)}
            >
              {index + 1}. {describeResult(result)}
            </button>
          ))}
        </div>
      )}
      {shown && <StatementView result={shown} exportable={results.length === 1 ? exportable : undefined} />}
    </div>
  );
}

function StatementView({
  result,
  exportable,
}: {
  result: StatementResult;
  exportable: Exportable | undefined;
}) {
  return (
    <div role="tabpanel" aria-label={describeResult(result)}>
      <p class="muted" data-testid="statement-summary">
        {describeResult(result)}
        {result.duration === null ? ' · run together with the next statements' : ` · ${result.duration} ms`}
      </p>
      {result.truncated && (
        <p class="warning" data-testid="rows-truncated">
          {result.rowCount === null
            ? `The first ${plural(result.rows.length, 'row')} are shown; the query had more, which were not read.`
            : `${plural(result.rows.length, 'row')} of ${result.rowCount.toLocaleString()} are shown.`}{' '}
          {exportable
            ? 'Show more rows with the setting above, or export them all: '
            : 'Show more rows with the setting above, narrow it with WHERE or LIMIT/OFFSET, or run the query alone to export every row.'}
          {exportable && <ExportAll query={exportable} />}
        </p>
      )}
      {result.fields.length > 0 && <RowsTable result={result} />}
    </div>
  );
}

function RowsTable({ result }: { result: StatementResult }) {
  return (
    <div class="grid-wrap">
      <table class="grid" aria-label="Result">
        <thead>
          <tr>
            {result.fields.map((field) => (
              <th key={field.name}>{field.name}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {result.rows.map((row, index) => (
            <tr key={index}>
              {result.fields.map((field) => (
                <td key={field.name} class={row[field.name] === null ? 'cell null' : 'cell'}>
                  {row[field.name] === null ? 'NULL' : shownText(field.dataTypeID, row[field.name])}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
