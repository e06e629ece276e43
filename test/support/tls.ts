import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';

export interface TestTls {
  /** Path of the CA certificate, as an operator would give it in LICENSE_SERVER_CA_FILE. */
  caFile: string;
  ca: string;
  cert: string;
  key: string;
}

/** A CA made for this run, and a certificate it signed for localhost / 127.0.0.1. */
export async function makeTestTls(): Promise<TestTls> {
  const ca = await generate([{ name: 'commonName', value: 'dbadmin test CA' }], {
    algorithm: 'sha256',
    keySize: 2048,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const server = await generate([{ name: 'commonName', value: 'localhost' }], {
    algorithm: 'sha256',
    keySize: 2048,
    ca: { key: ca.private, cert: ca.cert },
  });
  const dir = mkdtempSync(join(tmpdir(), 'dbadmin-tls-'));
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, ca.cert);
  return { caFile, ca: ca.cert, cert: server.cert, key: server.private };
}
