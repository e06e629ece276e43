import { useCallback, useEffect, useState } from 'preact/hooks';
import { loadSession, may, type Permission, reportedLicense, session, signOut } from './api';
import { badgeText, license, loadLicense } from './license';
import { AccountPage } from './pages/account';
import { AuditPage } from './pages/audit';
import { KeysPage } from './pages/keys';
import { LicensePage } from './pages/license';
import { MigrationsPage } from './pages/migrations';
import { PeoplePage } from './pages/people';
import { SchemasPage } from './pages/schemas';
import { SignIn } from './pages/signin';
import { SqlPage } from './pages/sql';
import { TablePage } from './pages/table';
import { TablesPage } from './pages/tables';
import { TenantsPage } from './pages/tenants';
import { WelcomePage } from './pages/welcome';
import { currentSchema, go, href, type Route, route } from './router';
import { schemas } from './schemas';
import { cycleTheme, theme } from './theme';
import { Dialog } from './ui';

/**
 * The console's shell: sign-in, the header (schemas, tenants, migrations, audit, license badge,
 * theme), the keyboard shortcuts, and the page the route in the URL names.
 */

/** Keys, what they do, and the permission it needs: the list shows only the person's own. */
const SHORTCUTS: [string, string, Permission?][] = [
  ['?', 'this list'],
  ['g s', 'schemas'],
  ['g t', "the schema's tables"],
  ['g q', 'SQL editor'],
  ['g k', 'API keys', 'keys.read'],
  ['g l', 'license'],
  ['Ctrl/Cmd + Enter', 'run the SQL'],
  ['Enter', 'edit the focused cell; in an editor, save that cell', 'write'],
  ['Esc', 'leave an editor or a dialog without saving'],
  ['Shift + click a header', 'add its column to the sort'],
];

/** Where `g` then `key` leads; the schema pages need a schema (the open one, else the first). */
function jumpTarget(key: string): Route | undefined {
  if (key === 's') return { page: 'schemas' };
  if (key === 'l') return { page: 'license' };
  const schema = currentSchema(route.value) ?? schemas.names.value[0];
  if (!schema) return undefined;
  if (key === 't') return { page: 'tables', schema };
  if (key === 'q') return { page: 'sql', schema };
  if (key === 'k' && may('keys.read')) return { page: 'keys', schema };
  return undefined;
}

const typing = (event: KeyboardEvent) =>
  event.ctrlKey ||
  event.metaKey ||
  event.altKey ||
  !!(event.target as HTMLElement).closest('input, textarea, select, [contenteditable="true"], dialog');

/** `?` and two-key `g` shortcuts, ignored while typing in a field. */
function useShortcuts(openHelp: () => void) {
  useEffect(() => {
    let pendingG = false;
    const onKey = (event: KeyboardEvent) => {
      if (typing(event)) return;
      const afterG = pendingG;
      pendingG = !afterG && event.key === 'g';
      const to = afterG ? jumpTarget(event.key) : undefined;
      if (to) go(to);
      if (!afterG && event.key === '?') openHelp();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [openHelp]);
}

function SchemaPicker() {
  const r = route.value;
  return (
    <select
      aria-label="Schema"
      value={currentSchema(r) ?? ''}
      onChange={(event) => {
        const next = event.currentTarget.value;
        if (!next) go({ page: 'schemas' });
        else if (r.page === 'sql' || r.page === 'keys') go({ page: r.page, schema: next });
        else go({ page: 'tables', schema: next });
      }}
    >
      <option value="">All schemas</option>
      {schemas.names.value.map((name) => (
        <option key={name}>{name}</option>
      ))}
    </select>
  );
}

function Sections({ schema }: { schema: string }) {
  const page = route.value.page;
  const current = (on: boolean) => (on ? 'page' : undefined);
  return (
    <nav class="sections">
      <a
        href={href({ page: 'tables', schema })}
        aria-current={current(page === 'tables' || page === 'table')}
      >
        Tables
      </a>
      <a href={href({ page: 'sql', schema })} aria-current={current(page === 'sql')}>
        SQL
      </a>
      {may('keys.read') && (
        <a href={href({ page: 'keys', schema })} aria-current={current(page === 'keys')}>
          API keys
        </a>
      )}
    </nav>
  );
}

const THEME_ICONS = { dark: '☾', light: '☀', system: '◐' };

function Header({ onHelp }: { onHelp: () => void }) {
  const schema = currentSchema(route.value);
  const status = license.value;
  return (
    <header class="top">
      <a class="brand" href={href({ page: 'schemas' })}>
        dbadmin
      </a>
      <SchemaPicker />
      {schema && <Sections schema={schema} />}
      <a href={href({ page: 'tenants' })} aria-current={route.value.page === 'tenants' ? 'page' : undefined}>
        Tenants
      </a>
      {may('migrations') && (
        <a
          href={href({ page: 'migrations' })}
          aria-current={route.value.page === 'migrations' ? 'page' : undefined}
        >
          Migrations
        </a>
      )}
      {may('audit.read') && (
        <a href={href({ page: 'audit' })} aria-current={route.value.page === 'audit' ? 'page' : undefined}>
          Audit
        </a>
      )}
      {may('people') && (
        <a href={href({ page: 'people' })} aria-current={route.value.page === 'people' ? 'page' : undefined}>
          People
        </a>
      )}
      <span class="spacer" />
      <a href={href({ page: 'account' })} aria-current={route.value.page === 'account' ? 'page' : undefined}>
        {session.value?.person?.login ?? 'admin'}
      </a>
      <a
        class={`badge ${status?.status ?? ''}`}
        href={href({ page: 'license' })}
        title={status?.warning ?? 'License'}
        data-testid="license-badge"
      >
        {badgeText(status)}
      </a>
      <button
        type="button"
        class="icon"
        onClick={cycleTheme}
        title={`Theme: ${theme.value} (click to change)`}
        aria-label={`Theme: ${theme.value}`}
      >
        {THEME_ICONS[theme.value]}
      </button>
      <button type="button" class="icon" onClick={onHelp} aria-label="Keyboard shortcuts">
        ?
      </button>
      <button type="button" onClick={signOut}>
        Sign out
      </button>
    </header>
  );
}

function Page() {
  const r = route.value;
  switch (r.page) {
    case 'license':
      return <LicensePage />;
    case 'schemas':
      return <SchemasPage />;
    case 'tables':
      return <TablesPage key={r.schema} schema={r.schema} />;
    case 'table':
      return (
        <TablePage
          key={`${r.schema}.${r.table}`}
          schema={r.schema}
          table={r.table}
          tab={r.tab}
          view={r.tab === 'data' ? r.view : undefined}
        />
      );
    case 'sql':
      return <SqlPage key={r.schema} schema={r.schema} />;
    case 'keys':
      return <KeysPage key={r.schema} schema={r.schema} />;
    case 'tenants':
      return <TenantsPage key={r.schema ?? ''} schema={r.schema} />;
    case 'audit':
      return <AuditPage key={r.schema ?? ''} schema={r.schema} />;
    case 'migrations':
      return <MigrationsPage key={r.id ?? ''} id={r.id} />;
    case 'people':
      return <PeoplePage />;
    case 'account':
    case 'welcome':
      return <AccountPage />;
  }
}

export function App() {
  const [help, setHelp] = useState(false);
  const signedIn = Boolean(session.value);
  const openHelp = useCallback(() => setHelp(true), []);
  useShortcuts(openHelp);
  useEffect(() => {
    if (session.peek() === undefined) loadSession().catch(() => (session.value = null));
  }, []);
  useEffect(() => {
    if (!signedIn) return;
    loadLicense().catch(() => undefined);
    schemas.load().catch(() => undefined);
  }, [signedIn]);
  // An answer reported another license state than the badge shows: read the status again.
  const reported = reportedLicense.value;
  useEffect(() => {
    if (signedIn && reported && license.peek()?.status !== reported) loadLicense().catch(() => undefined);
  }, [reported, signedIn]);
  // Until the server says whether the cookie signs anyone in: nothing, rather than a form that flashes.
  if (route.value.page === 'welcome' && !signedIn) return <WelcomePage token={route.value.token} />;
  if (session.value === undefined) return null;
  if (!signedIn) return <SignIn />;
  const blocked = license.value && !license.value.valid && route.value.page !== 'license';
  return (
    <>
      <Header onHelp={openHelp} />
      {blocked && (
        <p class="banner" role="alert">
          {license.value?.warning ?? 'The license is not valid.'}{' '}
          <a href={href({ page: 'license' })}>Open the license page</a>
        </p>
      )}
      <Page />
      {help && (
        <Dialog title="Keyboard shortcuts" onClose={() => setHelp(false)}>
          <dl class="facts">
            {SHORTCUTS.filter(([, , needs]) => !needs || may(needs)).map(([keys, what]) => (
              <>
                <dt>
                  <kbd>{keys}</kbd>
                </dt>
                <dd>{what}</dd>
              </>
            ))}
          </dl>
          <div class="actions">
            <button type="button" onClick={() => setHelp(false)} autoFocus>
              Close
            </button>
          </div>
        </Dialog>
      )}
    </>
  );
}
