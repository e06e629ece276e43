import type { CatalogRead, CatalogRow } from '#lib/db/catalog-read';
import type { Principal } from '#lib/principal';

/**
 * What sign-in leaves on the request's context for the middlewares after it (the key's scope,
 * the request log) and the route: who the request acts for, and the catalog read it carried. Its
 * own module, so those read it without importing sign-in (lib/http/authenticate imports them).
 */

/** A catalog read that was carried by the sign-in read, and the row it found (undefined: none). */
export interface Carried {
  read: CatalogRead<unknown>;
  row: CatalogRow | undefined;
}

export interface AuthContext {
  principal?: Principal;
  /** The route's catalog read, when the sign-in read carried it (lib/http/handler takes it). */
  carried?: Carried;
}
