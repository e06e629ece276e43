import type { KeyType } from '#lib/db/schema-roles';

/** Who a request acts for: the admin (Basic credentials) or an API key bound to one schema. */
export type Principal =
  | { kind: 'admin' }
  | { kind: 'key'; id: number; schema: string; keyType: KeyType /** For the audit log. */; name?: string };
