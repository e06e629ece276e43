import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { hostname, platform } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { writeFileAtomically } from '#lib/license/license-file';
import { logger } from '#lib/log';

/**
 * The deployment's machine id: made once, kept in the data directory (and recovered from the cache
 * row when the directory was lost), the id the license server counts deployments by.
 */

export const MACHINE_ID_FILE = 'machine-id.json';

const machineIdFile = z.object({
  machineId: z.string().regex(/^[0-9a-f]{32}$/),
  createdAt: z.string(),
  recovered: z.boolean(),
});

export type MachineIdFile = z.infer<typeof machineIdFile>;

/** 32 hex characters: SHA-256 of host name, platform and random bytes (SPEC.md). */
export const newMachineId = () =>
  createHash('sha256')
    .update(hostname())
    .update(platform())
    .update(randomBytes(32))
    .digest('hex')
    .slice(0, 32);

/**
 * This instance's machine id: from `machine-id.json`; else recovered from the license cache
 * table (`recover`), so a lost file does not count as a new deployment; else new. The file is
 * (re)written in the last two cases.
 */
export async function machineId(
  dir: string,
  recover: () => Promise<string | undefined>,
  now = new Date(),
): Promise<MachineIdFile> {
  const path = join(dir, MACHINE_ID_FILE);
  const existing = await readFile(path, 'utf8').then(
    (text) => machineIdFile.safeParse(JSON.parse(text)),
    () => undefined,
  );
  if (existing?.success) return existing.data;
  const recovered = await recover();
  const file: MachineIdFile = {
    machineId: recovered ?? newMachineId(),
    createdAt: now.toISOString(),
    recovered: recovered !== undefined,
  };
  // Best effort: without a writable directory (Lambda without EFS) the id lives in the cache table.
  await writeFileAtomically(path, `${JSON.stringify(file, null, 2)}\n`).catch((error: Error) =>
    logger.warn('cannot keep the machine id', { dir, reason: error.message }),
  );
  return file;
}
