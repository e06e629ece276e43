import { licenseHeaders } from '#lib/http/license-gate';
import type { LicenseState } from '#lib/license/licensing';

/**
 * X-License-Warning carries text from the license server (its refusal, why it was unreachable):
 * a header holds it bounded, one line, and in characters every HTTP stack takes.
 */
const state = (warning: string): LicenseState => ({
  valid: false,
  status: 'invalid',
  type: 'paid',
  expiresAt: null,
  trialExpiresAt: null,
  gracePeriodEndsAt: null,
  daysRemaining: null,
  lastValidatedAt: null,
  warning,
  offline: false,
  verified: true,
});

describe('X-License-Warning', () => {
  it('keeps a short warning as it is', () => {
    expect(licenseHeaders(state('license server unreachable: ECONNREFUSED'))).toEqual({
      'X-License-Status': 'invalid',
      'X-License-Warning': 'license server unreachable: ECONNREFUSED',
    });
  });

  it('is bounded, one line, printable ASCII, whatever the server said', () => {
    const said = `the license server refused the license: ${'é€😀\r\nSet-Cookie: x=1\t'.repeat(5000)}`;
    const warning = licenseHeaders(state(said))['X-License-Warning'] ?? '';
    expect(warning.length).toBeLessThanOrEqual(300);
    expect(warning).toMatch(/^[\x20-\x7e]+$/);
    expect(warning.startsWith('the license server refused the license: ')).toBe(true);
    expect(warning.endsWith('...')).toBe(true);
  });
});
