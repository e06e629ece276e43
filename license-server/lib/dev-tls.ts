import { generate } from 'selfsigned';

export interface DevelopmentTls {
  /** The CA certificate (PEM): what a client is told to trust. */
  ca: string;
  /** The server's certificate for localhost / 127.0.0.1, signed by the CA, and its key. */
  cert: string;
  key: string;
}

/**
 * A private CA and a localhost certificate it signs: for `npm run license-server` and for tests,
 * so clients verify certificates exactly as they would against a real server.
 */
export async function makeDevelopmentTls(validDays = 825): Promise<DevelopmentTls> {
  const authority = await generate([{ name: 'commonName', value: 'dbadmin license server development CA' }], {
    algorithm: 'sha256',
    keySize: 2048,
    notAfterDate: new Date(Date.now() + validDays * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const server = await generate([{ name: 'commonName', value: 'localhost' }], {
    algorithm: 'sha256',
    keySize: 2048,
    ca: { key: authority.private, cert: authority.cert },
  });
  return { ca: authority.cert, cert: server.cert, key: server.private };
}
