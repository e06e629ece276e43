/**
 * EXPLAIN's plan (FORMAT JSON) as a tree: each node with its rows estimated and, under ANALYZE,
 * actual, its time (all loops) and buffers, and its own share of the whole, so the costliest nodes
 * stand out. A node's own share is its time (or, without ANALYZE, its cost) less its children's.
 */

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Alias?: string;
  'Index Name'?: string;
  'Join Type'?: string;
  Operation?: string;
  'Plan Rows'?: number;
  'Total Cost'?: number;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Actual Total Time'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
  [detail: string]: unknown;
}

export interface Explained {
  Plan: PlanNode;
  'Planning Time'?: number;
  'Execution Time'?: number;
}

/** Conditions and keys worth reading under a node's line, in EXPLAIN's own words. */
const DETAILS = [
  'Index Cond',
  'Recheck Cond',
  'Hash Cond',
  'Merge Cond',
  'Join Filter',
  'Filter',
  'Sort Key',
  'Group Key',
];

/** A node's own share at or past which it is marked as one of the costliest. */
const COSTLY_SHARE = 0.25;

const analyzed = (node: PlanNode) => node['Actual Total Time'] !== undefined;

/** The node's time over all its loops (ms), or its cost without ANALYZE. */
function inclusive(node: PlanNode): number {
  if (analyzed(node)) return (node['Actual Total Time'] ?? 0) * (node['Actual Loops'] ?? 1);
  return node['Total Cost'] ?? 0;
}

function own(node: PlanNode): number {
  const children = (node.Plans ?? []).reduce((sum, child) => sum + inclusive(child), 0);
  return Math.max(0, inclusive(node) - children);
}

function title(node: PlanNode): string {
  const parts = [node['Join Type'] ? `${node['Join Type']} ${node['Node Type']}` : node['Node Type']];
  if (node.Operation && node['Node Type'] === 'ModifyTable') parts[0] = `${node.Operation}`;
  if (node['Index Name']) parts.push(`using ${node['Index Name']}`);
  if (node['Relation Name'])
    parts.push(
      `on ${node['Relation Name']}${node.Alias && node.Alias !== node['Relation Name'] ? ` ${node.Alias}` : ''}`,
    );
  return parts.join(' ');
}

/** "est. 100 · actual 3 × 2 loops", and how far off the estimate was when it was far. */
function rowsText(node: PlanNode): { text: string; off?: string } {
  const estimate = node['Plan Rows'] ?? 0;
  if (!analyzed(node)) return { text: `est. ${estimate.toLocaleString()} rows` };
  const loops = node['Actual Loops'] ?? 1;
  const actual = node['Actual Rows'] ?? 0;
  const text = `est. ${estimate.toLocaleString()} · actual ${actual.toLocaleString()}${loops > 1 ? ` × ${loops} loops` : ''} rows`;
  const ratio = Math.max(estimate, 1) / Math.max(actual, 1);
  const off =
    ratio >= 10 || ratio <= 0.1 ? `estimate off ${Math.round(ratio >= 1 ? ratio : 1 / ratio)}×` : undefined;
  return { text, off };
}

export function PlanTree({ explained }: { explained: Explained[] }) {
  const top = explained[0];
  if (!top) return null;
  const total = inclusive(top.Plan) || 1;
  const timed = analyzed(top.Plan);
  return (
    <section class="plan" aria-label="Plan">
      <p class="muted" data-testid="plan-summary">
        {timed
          ? `Executed in ${top['Execution Time']?.toFixed(2)} ms · planned in ${top['Planning Time']?.toFixed(2)} ms · rolled back`
          : `Estimated cost ${top.Plan['Total Cost']?.toFixed(2)} · not run`}
      </p>
      <ul class="plan-tree">
        <Node node={top.Plan} total={total} timed={timed} />
      </ul>
    </section>
  );
}

function Node({ node, total, timed }: { node: PlanNode; total: number; timed: boolean }) {
  const share = own(node) / total;
  const costly = share >= COSTLY_SHARE;
  const rows = rowsText(node);
  const hit = node['Shared Hit Blocks'];
  const read = node['Shared Read Blocks'];
  return (
    <li class={costly ? 'costly' : undefined}>
      <div class="plan-node">
        <span class="plan-title">{title(node)}</span>
        <span class="plan-share" title="this node's own share of the whole">
          <progress class="plan-bar" value={share} max={1} aria-hidden="true" />
          {Math.round(share * 100)}%
        </span>
        <span class="muted">
          {rows.text}
          {timed && ` · ${inclusive(node).toFixed(2)} ms`}
          {hit !== undefined &&
            ` · buffers ${hit.toLocaleString()} hit, ${(read ?? 0).toLocaleString()} read`}
        </span>
        {rows.off && <span class="warning"> {rows.off}</span>}
        {costly && <span class="plan-flag">costliest</span>}
      </div>
      {DETAILS.filter((key) => node[key] !== undefined).map((key) => (
        <div key={key} class="plan-detail mono">
          {key}: {Array.isArray(node[key]) ? (node[key] as unknown[]).join(', ') : String(node[key])}
        </div>
      ))}
      {node.Plans?.length ? (
        <ul>
          {node.Plans.map((child, index) => (
            <Node key={index} node={child} total={total} timed={timed} />
          ))}
        </ul>
      ) : null}
    </li>
  );
}
