import { signal } from '@preact/signals';

/** An answer of the API that is not a success: its `{error, message}` and any extra fields. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Who is signed in, as GET /api/session says (lib/access): their role, scope and permissions. */
export interface SignedIn {
  kind: 'admin' | 'person';
  person: { id: number; login: string; name: string } | null;
  role: string;
  schemas: string[] | null;
  permissions: string[];
  via: string | null;
  /** Sent as X-CSRF-Token with every change: the session's cookie alone changes nothing. */
  csrfToken: string | null;
}

/**
 * The console's session: the server keeps it, the browser holds only its HttpOnly cookie, which
 * no script reads (the console never sees a password after the sign-in form). undefined: not
 * asked yet; null: signed out.
 */
export const session = signal<SignedIn | null | undefined>(undefined);

/** Asks the server who the cookie signs in, if anyone (a reload stays signed in). */
export async function loadSession(): Promise<void> {
  const response = await send('GET', apiUrl('session'), undefined);
  if (response.status === 401) session.value = null;
  else if (response.ok) session.value = (await response.json()) as SignedIn;
  else throw await failure(response);
}

/** Signs in with a person's login (or AUTH_USER) and password: the server sets the session's cookie. */
export async function signIn(login: string, password: string): Promise<void> {
  const response = await send('POST', apiUrl('session'), { login, password });
  if (response.status === 401) throw new Error('Wrong user name or password');
  if (!response.ok) throw await failure(response);
  session.value = (await response.json()) as SignedIn;
}

/** Whether single sign-on is set up here (GET /api/sso): the sign-in page offers it. */
export interface SsoSetting {
  enabled: boolean;
  ssoOnly: boolean;
  startUrl: string | null;
}

export async function loadSso(): Promise<SsoSetting> {
  const response = await send('GET', apiUrl('sso'), undefined);
  if (!response.ok) throw await failure(response);
  return (await response.json()) as SsoSetting;
}

/**
 * What a failed single sign-on said (the service sends the browser back with `?sso_error=`), once:
 * the address is cleaned so a reload does not say it again.
 */
export function takeSsoError(): string | null {
  const params = new URLSearchParams(location.search);
  const error = params.get('sso_error');
  if (error !== null) history.replaceState(null, '', `${location.pathname}${location.hash}`);
  return error;
}

/** Accepts an invitation (or a password reset): the password is set, and the server signs them in. */
export async function acceptInvitation(token: string, password: string): Promise<void> {
  const response = await send('POST', apiUrl('session/invitation'), { token, password });
  if (!response.ok) throw await failure(response);
  session.value = (await response.json()) as SignedIn;
}

/** The permissions lib/access names (GET /api/session lists those the person holds). */
export type Permission =
  | 'read'
  | 'write'
  | 'alter'
  | 'keys.read'
  | 'keys.manage'
  | 'backups'
  | 'schemas.create'
  | 'schemas.delete'
  | 'migrations'
  | 'tenants.manage'
  | 'sql.admin'
  | 'audit.read'
  | 'metrics'
  | 'people'
  | 'license';

/**
 * Whether the signed-in person holds a permission (lib/access): the console leaves out, rather
 * than disables, every control for what they may not do (the server refuses it all the same, 403).
 */
export const may = (permission: Permission) => session.value?.permissions.includes(permission) ?? false;

/** Forgets what this browser kept of the person's work (SQL drafts, history). */
function forgetWork(): void {
  for (const key of Object.keys(localStorage))
    if (key.startsWith('dbadmin.sql.')) localStorage.removeItem(key);
}

/** Ends the session on the server (its cookie cleared) and forgets this browser's drafts. */
export async function signOut(): Promise<void> {
  await send('DELETE', apiUrl('session'), undefined).catch(() => undefined);
  forgetWork();
  session.value = null;
}

/** The session ended on the server (expired, ended by an owner): back to the form. */
function expired(): void {
  if (session.value) {
    forgetWork();
    session.value = null;
  }
}

/** The license state each answer reports (`X-License-Status`): the header's badge follows it. */
export const reportedLicense = signal<string | null>(null);

/** A list repeats its parameter (`filter=a.eq.1&filter=b.eq.2`). */
export type Query = Record<string, string | number | boolean | string[] | undefined>;

/** `api/...` relative to the page, so a stage prefix works; `?` parameters left out when undefined. */
export function apiUrl(path: string, query: Query = {}): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) for (const item of value) search.append(name, item);
    else if (value !== undefined) search.set(name, String(value));
  }
  const text = search.toString();
  return `api/${path}${text ? `?${text}` : ''}`;
}

/** A file (or part of one) sent as it is, in its own content type, rather than as JSON. */
export interface FileBody {
  blob: Blob;
  contentType: string;
}

const isFile = (body: unknown): body is FileBody =>
  typeof body === 'object' && body !== null && 'blob' in body && body.blob instanceof Blob;

const READS = new Set(['GET', 'HEAD']);

/** A request with the session's cookie (same origin) and, for a change, its CSRF token. */
async function send(method: string, url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { 'x-requested-with': 'dbadmin-console' };
  const csrf = session.peek()?.csrfToken;
  if (csrf && !READS.has(method)) headers['x-csrf-token'] = csrf;
  if (isFile(body)) {
    headers['content-type'] = body.contentType;
    return fetch(url, { method, headers, body: body.blob, signal });
  }
  // The service takes an authenticated POST only as JSON, with a body or without (lib/http/json-body).
  if (body !== undefined || method === 'POST') headers['content-type'] = 'application/json';
  return fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
}

async function failure(response: Response): Promise<ApiError> {
  const text = await response.text();
  try {
    // API Gateway's own answers carry only `message`; ours carry `error` and `message`.
    const { error, message, ...details } = JSON.parse(text) as { error?: string; message?: string };
    const title = error ?? (response.statusText || `HTTP ${response.status}`);
    return new ApiError(response.status, title, message ?? error ?? title, details);
  } catch {
    return new ApiError(
      response.status,
      response.statusText || 'Request failed',
      text || `HTTP ${response.status}`,
    );
  }
}

/**
 * Calls the API as the signed-in person. A 401 means the session ended on the server (expired,
 * ended by an owner, the person removed): the console goes back to the form.
 */
export async function api<T>(
  method: string,
  path: string,
  options: { query?: Query; body?: unknown | FileBody; signal?: AbortSignal } = {},
): Promise<T> {
  return (await answer(method, path, options)).json() as Promise<T>;
}

/** The API's answer as it came (an export page's text and headers); failures as api() throws them. */
export async function answer(
  method: string,
  path: string,
  options: { query?: Query; body?: unknown | FileBody; signal?: AbortSignal } = {},
): Promise<Response> {
  let response: Response;
  try {
    response = await send(method, apiUrl(path, options.query), options.body, options.signal);
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new ApiError(0, 'Network error', `the service did not answer (${(error as Error).message})`);
  }
  const reported = response.headers.get('x-license-status');
  if (reported) reportedLicense.value = reported;
  if (!response.ok) {
    if (response.status === 401) expired();
    throw await failure(response);
  }
  return response;
}

/** Hands a file made in the browser to the user as a download. */
export function saveFile(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const link = Object.assign(document.createElement('a'), { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
