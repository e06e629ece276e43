import type pg from 'pg';
import type { LeasePayload, SignedLease, TrustedKey } from '#lib/license/lease';
import type { LicenseFile } from '#lib/license/license-file';
import type { LicenseServerClient } from '#lib/license/server-client';
import { GRACE_MS, type LicenseRecord, type LicenseType, type ServerAnswer } from '#lib/license/state';

/**
 * What one container knows of its license (`Known`), and the record the state machine
 * (lib/license/state) judges from it. Read by lib/license/local-traces, changed by the server's
 * answers (lib/license/answers), written back by lib/license/persist; lib/license/licensing holds
 * the current one.
 */

export interface LicensingDeps {
  db: pg.Pool;
  dataDir: string;
  /** DBADMIN_SECRET: with the machine id, keys the license file. Not kept in the data directory. */
  secret: string;
  /** Throws LicenseServerMisconfigured when no server is configured. */
  client: () => LicenseServerClient;
  clock?: () => Date;
  /** PostgreSQL's clock; read with the cache row unless given (tests move it with `clock`). */
  databaseClock?: () => Date;
  /** Keys whose signatures are trusted: the compiled-in TRUSTED_KEYS unless a test gives its own. */
  trustedKeys?: readonly TrustedKey[];
  /** Unsigned answers are refused (LICENSE_ENFORCEMENT=strict). */
  requireSignature?: boolean;
}

export interface Lease {
  signed: SignedLease;
  payload: LeasePayload;
}

/** A valid answer from a server that does not sign: when it came, and what it said. */
export interface Unsigned {
  at: Date;
  type: LicenseType;
  expiresAt: Date | null;
}

/** What this container knows: local traces (re-read every minute) and its own last server answer. */
export interface Known {
  machineId: string;
  file: LicenseFile | undefined;
  /** The key from the license file: needed to ask the server, grants nothing by itself. */
  key: string | null;
  email: string | null;
  keyHash: string | null;
  /** The newest lease signed by a trusted key for this key and machine, from file or cache row. */
  lease: Lease | undefined;
  /** A lease signed for this key has been seen: unsigned answers for it are refused. */
  pinned: boolean;
  /** Persisted refusal from a server that does not sign. */
  refusedUnsigned: boolean;
  trial: { expiresAt: Date; email: string | null } | undefined;
  /** The latest trustworthy time seen, ms (lib/license/high-water). */
  highWater: number;
  /** This process's last answer from the server, for `keyHash`. */
  answer: ServerAnswer | undefined;
  /**
   * The last unsigned valid answer (warn mode, a server that does not sign): this process's, or
   * one recorded in the license file. Never in strict mode, never beside a signed lease.
   */
  unsigned: Unsigned | undefined;
  /** Local ms of the last server call, and of the last read of file and row. */
  checkedAt: number;
  loadedAt: number;
}

export const asDate = (value: string | null | undefined) => (value ? new Date(value) : null);

/**
 * The license as the state machine sees it: built from signed leases and trial markers, and in
 * warn mode from the last unsigned validation.
 */
export function recordOf(known: Known): LicenseRecord | undefined {
  if (known.keyHash) return keyedRecord(known);
  if (!known.trial) return undefined;
  return {
    type: 'trial',
    keyed: false,
    expiresAt: known.trial.expiresAt,
    lastValidatedAt: null,
    graceEndsAt: null,
    verified: false,
    refused: null,
  };
}

/**
 * A license held by key: the newest of the signed lease and the last unsigned answer (a SPEC-only
 * server, warn mode only, reported `verified: false`); its grace runs from that answer's time.
 */
function keyedRecord(known: Known): LicenseRecord {
  const lease = known.lease?.payload;
  const type = (lease?.type ?? known.unsigned?.type ?? known.file?.type ?? 'paid') as LicenseType;
  const { unsigned } = known;
  if (unsigned && (!lease || Date.parse(lease.serverTime) < unsigned.at.getTime())) {
    return {
      type,
      keyed: true,
      expiresAt: unsigned.expiresAt,
      lastValidatedAt: unsigned.at,
      graceEndsAt: new Date(unsigned.at.getTime() + GRACE_MS[type]),
      verified: false,
      refused: null,
    };
  }
  if (!lease) {
    return {
      type,
      keyed: true,
      expiresAt: asDate(known.file?.expiresAt),
      lastValidatedAt: null,
      graceEndsAt: null,
      verified: false,
      refused: known.refusedUnsigned ? 'License key not found or inactive' : null,
    };
  }
  const good = lease.valid && lease.activated;
  const refusal = lease.valid
    ? 'this machine does not hold a deployment slot: activate again'
    : 'License key not found or inactive';
  return {
    type,
    keyed: true,
    expiresAt: asDate(lease.expiresAt),
    lastValidatedAt: good ? new Date(lease.serverTime) : null,
    graceEndsAt: good ? new Date(lease.notAfter) : null,
    verified: true,
    refused: good ? null : refusal,
  };
}
