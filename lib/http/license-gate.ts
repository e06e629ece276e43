import type { MiddlewareObj } from '@middy/core';
import { getConfig } from '#lib/config';
import { ApiError } from '#lib/errors';
import type { HttpResponse } from '#lib/http/respond';
import { getLicensing } from '#lib/license/index';
import type { LicenseState } from '#lib/license/licensing';
import { logger } from '#lib/log';

/**
 * The license gate: SPEC.md's runtime rules on every gated endpoint, from the license state in
 * memory; the X-License-Status and X-License-Warning headers, and the 402 of strict enforcement.
 */

const ALLOWED = new Set(['active', 'trial', 'grace_period']);

interface GateInternal extends Record<string, unknown> {
  license?: LicenseState;
}

/**
 * SPEC.md's runtime rules on every endpoint but health, license and trial: the state comes from
 * memory (the server is asked only when the last check is 12 hours old). In `warn` mode (default)
 * requests always proceed, so activation stays possible, with X-License-Status and, when not
 * healthy, X-License-Warning; `strict` answers 402 for expired, invalid or no license.
 */
export const licenseGate = (): MiddlewareObj<
  unknown,
  HttpResponse,
  Error,
  import('aws-lambda').Context,
  GateInternal
> => ({
  before: async (request) => {
    const [config, licensing] = await Promise.all([getConfig(), getLicensing()]);
    const state = await licensing.state();
    request.internal.license = state;
    logChange(state);
    if (ALLOWED.has(state.status) || config.LICENSE_ENFORCEMENT === 'warn') return;
    // SPEC.md: in development mode a network error lets the request proceed.
    if (state.offline && config.NODE_ENV === 'development') return;
    throw new ApiError(402, 'License required', state.warning ?? `license ${state.status}`, {
      headers: licenseHeaders(state),
    });
  },
  after: (request) => {
    const state = request.internal.license;
    if (state && request.response) Object.assign(request.response.headers, licenseHeaders(state));
  },
});

/** The most of a warning a header carries; the whole of it is in GET /api/license/status. */
const MAX_WARNING = 256;

/**
 * A warning as a header value: it quotes the license server (its refusal, why it was
 * unreachable), so one line of printable ASCII, bounded; a header with other characters makes some
 * HTTP stacks fail the whole response.
 */
function headerText(text: string): string {
  const printable = text.replace(/\s+/g, ' ').replace(/[^\x20-\x7e]/g, '?');
  return printable.length > MAX_WARNING ? `${printable.slice(0, MAX_WARNING - 3)}...` : printable;
}

/** A state carries a warning exactly when it is not healthy (grace, expired, invalid, none). */
export function licenseHeaders(state: LicenseState): Record<string, string> {
  return state.warning
    ? { 'X-License-Status': state.status, 'X-License-Warning': headerText(state.warning) }
    : { 'X-License-Status': state.status };
}

let lastLogged: string | undefined;

/** One log line when the license's condition changes, not one per request. */
function logChange(state: LicenseState): void {
  const line = `${state.status}: ${state.warning ?? 'ok'}`;
  if (line === lastLogged) return;
  lastLogged = line;
  if (state.warning) logger.warn('license', { status: state.status, warning: state.warning });
}
