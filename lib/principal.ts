import type { KeyType } from '#lib/db/role-names';

/** Who a request acts for: the admin (Basic credentials) or an API key bound to one schema. */
export type Principal =
  | { kind: 'admin' }
  | {
      kind: 'key';
      id: number;
      schema: string;
      keyType: KeyType;
      /** The key's name, for the audit log (the sign-in read finds it with the key). */
      name?: string;
    };
