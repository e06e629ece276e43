import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DevelopmentTls, makeDevelopmentTls } from '../../license-server/lib/dev-tls';

export interface TestTls extends DevelopmentTls {
  /** Path of the CA certificate, as an operator would give it in LICENSE_SERVER_CA_FILE. */
  caFile: string;
}

/** A CA made for this run, and a certificate it signed for localhost / 127.0.0.1. */
export async function makeTestTls(): Promise<TestTls> {
  const tls = await makeDevelopmentTls(2);
  const caFile = join(mkdtempSync(join(tmpdir(), 'dbadmin-tls-')), 'ca.pem');
  writeFileSync(caFile, tls.ca);
  return { ...tls, caFile };
}
