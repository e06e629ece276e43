import type { Grant } from '#lib/access';
import type { KeyType } from '#lib/db/role-names';

/** How a person signed in: a console session from a password or single sign-on, or a personal token. */
export type SignedInVia = 'password' | 'sso' | 'token';

/**
 * Who a request acts for: the administrator of AUTH_USER/AUTH_PASS (Basic credentials: every
 * right, as SPEC.md defines it), a person (lib/access: a role and a scope), or an API key bound to
 * one schema.
 */
export type Principal =
  | {
      kind: 'admin';
      /** The console session it signed in with, if not Basic credentials. */
      sessionId?: number;
    }
  | ({
      kind: 'person';
      id: number;
      /** Their sign-in name, for the audit log. */
      login: string;
      via: SignedInVia;
      /** The console session the request came with (via password or sso). */
      sessionId?: number;
      /** The personal token it came with (via token). */
      tokenId?: number;
    } & Grant)
  | {
      kind: 'key';
      id: number;
      schema: string;
      keyType: KeyType;
      /** The key's name, for the audit log (the sign-in read finds it with the key). */
      name?: string;
    };

export type Person = Extract<Principal, { kind: 'person' }>;

/** Whose a thing is (an import, a bundle): the admin's, one person's or one key's. */
export const ownerOf = (principal: Principal | undefined) =>
  principal === undefined || principal.kind === 'admin' ? 'admin' : `${principal.kind}:${principal.id}`;
