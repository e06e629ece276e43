import { useEffect, useState } from 'preact/hooks';
import { api, may } from '../../api';
import { ChangeDialog, type ChangeRequest, DropDialog, formatBytes } from '../../changes/preview';
import { ErrorText, useLoad } from '../../ui';
import type { TableStructure } from '../../values';
import { ColumnChoice } from './column-choice';

/**
 * A table's indexes tab: each index with its key, method, size, whether it is valid and how often
 * it was used, Drop on each; and a form that creates one (unique, method, partial, concurrently),
 * showing a concurrent build's progress while it runs.
 */

const METHODS = ['btree', 'hash', 'gin', 'gist', 'brin'];
const PROGRESS_EVERY_MS = 500;

interface Index {
  name: string;
  columns: { column: string | null; expression: string | null }[];
  include: string[];
  method: string;
  unique: boolean;
  primary: boolean;
  constraint: string | null;
  where: string | null;
  sizeBytes: number;
  valid: boolean;
  scans: number | null;
  definition: string | null;
}

interface Build {
  pid: number;
  index: string | null;
  phase: string | null;
  lockersDone: number | null;
  lockersTotal: number | null;
  percent: number | null;
}

const e = encodeURIComponent;

/** The index builds running on the table, read every half second while this is shown. */
export function BuildProgress({ schema, table }: { schema: string; table: string }) {
  const [builds, setBuilds] = useState<Build[]>([]);
  const [failure, setFailure] = useState<unknown>(undefined);
  useEffect(() => {
    let live = true;
    let misses = 0;
    const read = async () => {
      try {
        const answer = await api<{ builds: Build[] }>('GET', `table/${e(table)}/indexes/progress`, {
          query: { schema },
        });
        misses = 0;
        if (live) {
          setBuilds(answer.builds);
          setFailure(undefined);
        }
      } catch (error) {
        // One missed reading is shown by the next; several in a row are said.
        if (++misses >= 3 && live) setFailure(error);
      }
      if (live) timer = setTimeout(read, PROGRESS_EVERY_MS);
    };
    let timer = setTimeout(read, 0);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [schema, table]);
  if (failure) return <ErrorText error={failure} />;
  if (builds.length === 0) return <p class="muted">Building…</p>;
  return (
    <div role="status" aria-label="Index build progress">
      <p class="muted">Every index build running on this table:</p>
      {builds.map((b) => (
        <div key={b.pid} class="build">
          <p>
            <span class="mono">{b.index ?? 'index'}</span>: {b.phase ?? 'starting'}
            {b.lockersTotal ? ` (${b.lockersDone ?? 0} of ${b.lockersTotal} older transactions done)` : ''}
            {b.percent !== null ? `, ${Math.round(b.percent)}% of this phase` : ''}
          </p>
          <progress max={100} value={b.percent ?? undefined} />
        </div>
      ))}
    </div>
  );
}

function CreateIndex({
  schema,
  structure,
  onClose,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onClose: () => void;
  onChanged: () => Promise<void>;
}) {
  const [columns, setColumns] = useState<string[]>([]);
  const [name, setName] = useState('');
  const [unique, setUnique] = useState(false);
  const [method, setMethod] = useState('btree');
  const [where, setWhere] = useState('');
  const [concurrently, setConcurrently] = useState(true);
  const request = (): ChangeRequest => {
    if (columns.length === 0) throw new Error('Choose the columns to index first');
    return {
      method: 'POST',
      path: `table/${e(structure.table)}/indexes`,
      body: {
        schema,
        columns,
        unique: unique && method === 'btree',
        method,
        concurrently,
        ...(name.trim() ? { name: name.trim() } : {}),
        ...(where.trim() ? { where } : {}),
      },
    };
  };
  return (
    <ChangeDialog
      title={`Create an index on ${structure.table}`}
      request={request}
      onClose={onClose}
      onDone={onChanged}
      running={concurrently ? <BuildProgress schema={schema} table={structure.table} /> : undefined}
    >
      <ColumnChoice
        label="Columns, in key order"
        columns={structure.columns.map((c) => c.name)}
        chosen={columns}
        onChange={setColumns}
        ordered
      />
      <label>
        Name (optional)
        <input value={name} onInput={(event) => setName(event.currentTarget.value)} />
      </label>
      <label>
        Method
        <select value={method} onChange={(event) => setMethod(event.currentTarget.value)}>
          {METHODS.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
      </label>
      <label>
        Only rows where (optional)
        <input
          value={where}
          placeholder="deleted_at IS NULL"
          onInput={(event) => setWhere(event.currentTarget.value)}
        />
      </label>
      <label class="inline">
        <input
          type="checkbox"
          checked={unique && method === 'btree'}
          disabled={method !== 'btree'}
          onChange={(event) => setUnique(event.currentTarget.checked)}
        />
        Unique (btree only)
      </label>
      <label class="inline">
        <input
          type="checkbox"
          checked={concurrently}
          onChange={(event) => setConcurrently(event.currentTarget.checked)}
        />
        Concurrently: reads and writes go on while it builds (slower)
      </label>
    </ChangeDialog>
  );
}

const keyText = (index: Index) =>
  index.columns.map((c) => c.column ?? c.expression ?? '(expression)').join(', ') +
  (index.include.length > 0 ? ` INCLUDE (${index.include.join(', ')})` : '');

export function IndexesTab({
  schema,
  structure,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onChanged: () => Promise<void>;
}) {
  const list = useLoad(
    () => api<{ indexes: Index[] }>('GET', `table/${e(structure.table)}/indexes`, { query: { schema } }),
    [schema, structure],
  );
  const [dialog, setDialog] = useState<{ drop: Index } | 'create' | undefined>(undefined);
  const alters = may('alter');
  return (
    <section aria-label="Indexes">
      <ErrorText error={list.error} />
      <table class="grid" aria-label={`Indexes of ${structure.table}`}>
        <thead>
          <tr>
            <th>Index</th>
            <th>Key</th>
            <th>Method</th>
            <th>Size</th>
            <th>Used</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(list.data?.indexes ?? []).map((index) => (
            <tr key={index.name}>
              <td class="mono">
                {index.name}
                {index.primary ? ' (primary key)' : index.unique ? ' (unique)' : ''}
                {!index.valid && <span class="warning"> invalid: not used by queries</span>}
              </td>
              <td class="mono">
                {keyText(index)}
                {index.where ? ` WHERE ${index.where}` : ''}
              </td>
              <td>{index.method}</td>
              <td>{formatBytes(index.sizeBytes)}</td>
              <td>{index.scans === null ? '—' : `${index.scans.toLocaleString()} scans`}</td>
              <td>
                {index.constraint ? (
                  <span class="muted">backs {index.constraint}</span>
                ) : (
                  alters && (
                    <button
                      type="button"
                      aria-label={`Drop index ${index.name}`}
                      onClick={() => setDialog({ drop: index })}
                    >
                      Drop
                    </button>
                  )
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {alters && (
        <button type="button" class="primary" onClick={() => setDialog('create')}>
          Create an index
        </button>
      )}
      {dialog === 'create' && (
        <CreateIndex
          schema={schema}
          structure={structure}
          onClose={() => setDialog(undefined)}
          onChanged={onChanged}
        />
      )}
      {dialog && dialog !== 'create' && (
        <DropDialog
          what="index"
          name={dialog.drop.name}
          path={`table/${e(structure.table)}/indexes/${e(dialog.drop.name)}`}
          schema={schema}
          option={{
            name: 'concurrently',
            label: 'Concurrently: reads and writes go on meanwhile',
            checked: true,
          }}
          onClose={() => setDialog(undefined)}
          onDone={onChanged}
        />
      )}
    </section>
  );
}
