import { signal } from '@preact/signals';
import { api } from './api';

/**
 * The license as the console shows it: the status read from the API, and the header badge's text.
 */

export interface LicenseStatus {
  valid: boolean;
  status: 'active' | 'trial' | 'grace_period' | 'expired' | 'invalid' | 'none';
  type: 'trial' | 'paid' | null;
  expiresAt: string | null;
  trialExpiresAt: string | null;
  gracePeriodEndsAt: string | null;
  daysRemaining: number | null;
  lastValidatedAt: string | null;
  warning: string | null;
  offline?: boolean;
  verified?: boolean | null;
}

/** The license as the header's badge and the license page show it. */
export const license = signal<LicenseStatus | undefined>(undefined);

export async function loadLicense(): Promise<void> {
  license.value = await api<LicenseStatus>('GET', 'license/status');
}

export async function refreshLicense(): Promise<void> {
  license.value = await api<LicenseStatus>('POST', 'license/refresh');
}

export function badgeText(status: LicenseStatus | undefined): string {
  if (!status) return 'License…';
  switch (status.status) {
    case 'trial':
      return `Trial: ${status.daysRemaining ?? 0} day${status.daysRemaining === 1 ? '' : 's'} left`;
    case 'active':
      return 'Licensed';
    case 'grace_period':
      return 'Offline grace';
    case 'expired':
      return 'License expired';
    case 'invalid':
      return 'License invalid';
    case 'none':
      return 'No license';
  }
}
