import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';

/**
 * SCRAM-SHA-256 verifiers for role passwords: a login's password is sent to PostgreSQL already
 * hashed, never in clear text a log or pg_stat_activity could show.
 */

const ITERATIONS = 4096;

/**
 * A SCRAM-SHA-256 verifier in PostgreSQL's stored format (as psql's \password makes it), so the
 * plain password never travels to the server or shows up in its statement log.
 * Assumes printable ASCII, for which SASLprep changes nothing.
 */
export function scramVerifier(password: string, salt = randomBytes(16)): string {
  const salted = pbkdf2Sync(password, salt, ITERATIONS, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  const b64 = (buffer: Buffer) => buffer.toString('base64');
  return `SCRAM-SHA-256$${ITERATIONS}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}
