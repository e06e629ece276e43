import { randomBytes } from 'node:crypto';

/** A name no other test (or earlier run on the same database) uses. */
export const uniqueName = (prefix: string) => `${prefix}_${randomBytes(5).toString('hex')}`;
