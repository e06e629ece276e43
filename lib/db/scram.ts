import { createHash, createHmac, pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

/**
 * SCRAM-SHA-256 verifiers for role passwords: a login's password is sent to PostgreSQL already
 * hashed, never in clear text a log or pg_stat_activity could show.
 */

const derive = promisify(pbkdf2);

/**
 * PBKDF2 rounds for a password a person chose (a schema's `_user`): PostgreSQL's own default.
 * The roles dbadmin logs in as have passwords of 256 random bits (lib/db/role-names rolePassword),
 * which no number of rounds makes any harder to guess: theirs take few, since every login pays
 * them again on the client's side.
 */
const PERSON_ITERATIONS = 4096;
export const DERIVED_ITERATIONS = 64;

/**
 * A SCRAM-SHA-256 verifier in PostgreSQL's stored format (as psql's \password makes it), so the
 * plain password never travels to the server or shows up in its statement log. Derived on
 * libuv's threads, off the event loop. Assumes printable ASCII, for which SASLprep changes nothing.
 */
export async function scramVerifier(
  password: string,
  iterations: number = PERSON_ITERATIONS,
  salt = randomBytes(16),
): Promise<string> {
  const salted = await derive(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  const b64 = (buffer: Buffer) => buffer.toString('base64');
  return `SCRAM-SHA-256$${iterations}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}
