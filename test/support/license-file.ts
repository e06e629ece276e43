import type { LicenseFile } from '#lib/license/license-file';

/** A paid lifetime license as the license file holds it, validated and saved at `at`. */
export const paidLicenseFile = (licenseKey: string, at = new Date().toISOString()): LicenseFile => ({
  licenseKey,
  email: 'owner@example.com',
  type: 'paid',
  valid: true,
  status: 'active',
  expiresAt: null,
  daysRemaining: null,
  lastValidatedAt: at,
  lastSavedAt: at,
});
