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

const CREDENTIALS = 'dbadmin.credentials';

/** `user:password` as base64, kept for the tab's life (sessionStorage): a reload stays signed in. */
export const credentials = signal<string | null>(sessionStorage.getItem(CREDENTIALS));

export function signIn(token: string): void {
  sessionStorage.setItem(CREDENTIALS, token);
  credentials.value = token;
}

/** Forgets the credentials and what this browser kept of the admin's work (SQL drafts, history). */
export function signOut(): void {
  sessionStorage.removeItem(CREDENTIALS);
  for (const key of Object.keys(localStorage))
    if (key.startsWith('dbadmin.sql.')) localStorage.removeItem(key);
  credentials.value = null;
}

/** The credentials no longer hold (changed on the server): back to the form, unless already newer. */
function expired(token: string | null): void {
  if (token !== null && credentials.value === token) signOut();
}

/** The license state each answer reports (`X-License-Status`): the header's badge follows it. */
export const reportedLicense = signal<string | null>(null);

export const basicToken = (user: string, password: string) =>
  btoa(String.fromCharCode(...new TextEncoder().encode(`${user}:${password}`)));

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

async function send(
  method: string,
  url: string,
  body: unknown,
  token: string | null,
  signal?: AbortSignal,
): Promise<Response> {
  const headers: Record<string, string> = { 'x-requested-with': 'dbadmin-console' };
  if (token) headers.authorization = `Basic ${token}`;
  if (isFile(body)) {
    headers['content-type'] = body.contentType;
    return fetch(url, { method, headers, body: body.blob, signal });
  }
  if (body !== undefined) headers['content-type'] = 'application/json';
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
 * Calls the API as the signed-in admin. A 401 means the credentials no longer hold (changed on the
 * server): the console signs out, back to the form.
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
  const token = credentials.value;
  let response: Response;
  try {
    response = await send(method, apiUrl(path, options.query), options.body, token, options.signal);
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new ApiError(0, 'Network error', `the service did not answer (${(error as Error).message})`);
  }
  const reported = response.headers.get('x-license-status');
  if (reported) reportedLicense.value = reported;
  if (!response.ok) {
    if (response.status === 401) expired(token);
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

/** Checks credentials without keeping them: true when the API accepts them. */
export async function checkCredentials(token: string): Promise<boolean> {
  const response = await send('GET', apiUrl('schemas'), undefined, token);
  if (response.status === 401) return false;
  // 402 (strict license) still proves the credentials: the license page is the way back.
  if (response.ok || response.status === 402) return true;
  throw await failure(response);
}
