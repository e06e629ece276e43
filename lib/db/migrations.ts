import type pg from 'pg';
import { quoteCatalogName } from '#lib/db/identifiers';
import { INTERNAL_SCHEMA } from '#lib/db/own-schemas';
import { isPgError } from '#lib/db/pg-errors';
import { inTransaction } from '#lib/db/transaction';

export { INTERNAL_SCHEMA };

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

/** Append only: a migration, once released, is never edited. */
export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'license cache',
    sql: `
      CREATE TABLE _dbadmin.license_cache (
        machine_id        varchar(64) PRIMARY KEY,
        license_key_hash  varchar(255),
        license_type      varchar(20),
        expires_at        timestamptz,
        last_validated_at timestamptz,
        created_at        timestamptz NOT NULL DEFAULT now(),
        updated_at        timestamptz NOT NULL DEFAULT now()
      )`,
  },
  {
    id: 2,
    name: 'api keys',
    sql: `
      CREATE TABLE _dbadmin.api_keys (
        id           serial PRIMARY KEY,
        schema_name  text NOT NULL,
        key_name     text NOT NULL,
        key_type     text NOT NULL CHECK (key_type IN ('anon', 'service_role')),
        key_hash     bytea NOT NULL UNIQUE,
        key_prefix   varchar(8) NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        last_used_at timestamptz,
        is_active    boolean NOT NULL DEFAULT true,
        UNIQUE (schema_name, key_name)
      )`,
  },
  {
    id: 3,
    name: 'schema locks',
    // Rows to lock while a schema or its roles change: unlike advisory locks, which any login may
    // take (and hold, to stop the admin), nobody but the service can touch this table.
    // `closing`: the schema is being deleted; nothing may give its roles a login again.
    sql: `CREATE TABLE _dbadmin.schema_locks (schema_name text PRIMARY KEY, closing boolean NOT NULL DEFAULT false)`,
  },
  {
    id: 4,
    name: 'signed leases and the database trial',
    // The cache row keeps the last signed lease (verified again on every read), its sequence (an
    // older lease never replaces a newer one), the clock's high-water mark and the last status.
    // One trial per database: a row that outlives license files and machine ids.
    sql: `
      ALTER TABLE _dbadmin.license_cache
        ADD COLUMN lease      text,
        ADD COLUMN lease_seq  bigint,
        ADD COLUMN high_water timestamptz,
        ADD COLUMN status     varchar(20);
      CREATE TABLE _dbadmin.trial (
        one_per_database boolean PRIMARY KEY DEFAULT true CHECK (one_per_database),
        email            text NOT NULL,
        machine_id       varchar(64) NOT NULL,
        started_at       timestamptz NOT NULL,
        expires_at       timestamptz NOT NULL
      )`,
  },
  {
    id: 5,
    name: 'failed sign-ins',
    // One count per client address, shared by every container (lib/http/auth-throttle). Unlogged:
    // a crash forgets a minute of counts, and no write waits for the disk.
    sql: `
      CREATE UNLOGGED TABLE _dbadmin.sign_in_failures (
        client      text PRIMARY KEY,
        failures    integer NOT NULL,
        window_ends timestamptz NOT NULL
      )`,
  },
  {
    id: 6,
    name: 'import sessions',
    // An import sent in parts (lib/admin/import-sessions), staged until its commit. Unlogged: a
    // crash loses parts in flight, which their sender sends again, and no part waits on the WAL.
    sql: `
      CREATE UNLOGGED TABLE _dbadmin.import_sessions (
        id          uuid PRIMARY KEY,
        schema_name text NOT NULL,
        table_name  text NOT NULL,
        owner       text NOT NULL,
        options     jsonb NOT NULL,
        state       text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'committing', 'committed')),
        outcome     jsonb,
        expires_at  timestamptz NOT NULL
      );
      CREATE INDEX ON _dbadmin.import_sessions (expires_at);
      CREATE UNLOGGED TABLE _dbadmin.import_parts (
        session_id uuid NOT NULL REFERENCES _dbadmin.import_sessions ON DELETE CASCADE,
        part       integer NOT NULL,
        bytes      bytea NOT NULL,
        PRIMARY KEY (session_id, part)
      )`,
  },
  {
    id: 7,
    name: 'import commits that did not report back',
    // When a commit began: one that never reported back (its process killed) is told apart from
    // one still running, and can be abandoned, never run twice (it may have written its rows).
    sql: `ALTER TABLE _dbadmin.import_sessions ADD COLUMN committing_since timestamptz`,
  },
  {
    id: 8,
    name: 'key request counts',
    // Written with last_used_at, in batches (lib/admin/keys touchKey): a floor, not an audit.
    sql: `ALTER TABLE _dbadmin.api_keys ADD COLUMN request_count bigint NOT NULL DEFAULT 0`,
  },
  {
    id: 9,
    name: 'audit log',
    // Entries are written inside the change's own transaction, which may be a tenant role's
    // session: the one door in is _dbadmin_audit.append, which takes an entry only with the seal
    // the service computes from a key in _dbadmin (lib/db/audit-log). Tenants may call it, never
    // forge one; nobody but the service can read, change or delete the log.
    sql: `
      CREATE TABLE _dbadmin.audit_log (
        seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id              uuid NOT NULL UNIQUE,
        at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
        request_id      text NOT NULL,
        actor           text NOT NULL CHECK (actor IN ('admin', 'key', 'public')),
        key_id          integer,
        key_name        text,
        key_type        text,
        schema_name     text,
        action          text NOT NULL,
        target          text,
        status          smallint NOT NULL,
        row_count       bigint,
        sql_kind        text,
        sql_fingerprint text,
        sql_text        text,
        xact_id         bigint
      );
      -- Entries arrive in time order: a BRIN index finds a time range at almost no cost per write.
      CREATE INDEX ON _dbadmin.audit_log USING brin (at);
      CREATE INDEX ON _dbadmin.audit_log (schema_name, seq);
      CREATE TABLE _dbadmin.audit_seal (key bytea NOT NULL);
      INSERT INTO _dbadmin.audit_seal
        SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');
      CREATE SCHEMA _dbadmin_audit;
      -- Runs as the service's role, called from tenant sessions: pg_temp comes last on its path
      -- (else it is searched first for types and tables, and a tenant's temporary domain named
      -- bytea would run as the service), and every type is written in full besides.
      CREATE FUNCTION _dbadmin_audit.append(entry pg_catalog.text, seal pg_catalog.text) RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      DECLARE
        k pg_catalog.bytea := (SELECT s.key FROM _dbadmin.audit_seal s);
        e pg_catalog.jsonb;
      BEGIN
        -- Compared as digests of the seals, so the time taken says nothing about the right one.
        IF entry IS NULL OR seal IS NULL OR seal !~ '^[0-9a-f]{64}$'
           OR pg_catalog.sha256(pg_catalog.decode(seal, 'hex'))
              IS DISTINCT FROM pg_catalog.sha256(pg_catalog.sha256(k || pg_catalog.sha256(k || pg_catalog.convert_to(entry, 'UTF8'))))
        THEN
          RAISE EXCEPTION 'audit entry refused: its seal does not match' USING ERRCODE = '42501';
        END IF;
        e := entry::pg_catalog.jsonb;
        -- An entry sealed for one transaction (its text may be seen by code running in it) is
        -- taken in that transaction only: never replayed in another, should that one roll back.
        IF e ? 'xid' AND (e->>'xid')::pg_catalog.xid8 IS DISTINCT FROM pg_catalog.pg_current_xact_id() THEN
          RAISE EXCEPTION 'audit entry refused: it was sealed for another transaction' USING ERRCODE = '42501';
        END IF;
        INSERT INTO _dbadmin.audit_log (id, request_id, actor, key_id, key_name, key_type, schema_name,
                                        action, target, status, row_count, sql_kind, sql_fingerprint, sql_text, xact_id)
        VALUES ((e->>'id')::pg_catalog.uuid, e->>'requestId', e->>'actor', (e->>'keyId')::pg_catalog.int4,
                e->>'keyName', e->>'keyType', e->>'schema', e->>'action', e->>'target',
                (e->>'status')::pg_catalog.int2, (e->>'rows')::pg_catalog.int8, e->>'sqlKind',
                e->>'sqlFingerprint', e->>'sqlText', (e->>'xid')::pg_catalog.int8);
      END
      $fn$;
      REVOKE ALL ON FUNCTION _dbadmin_audit.append(text, text) FROM PUBLIC;
      GRANT USAGE ON SCHEMA _dbadmin_audit TO PUBLIC;
      GRANT EXECUTE ON FUNCTION _dbadmin_audit.append(text, text) TO PUBLIC`,
  },
  {
    id: 10,
    name: 'tenant quotas',
    // Set by the admin (lib/admin/quotas). used_bytes is measured in the background by whichever
    // container finds it older than its interval (lib/db/quotas), never on a request's path.
    // relation_size measures a table without waiting on a tenant's lock: past 50 ms it answers
    // -1, and the schema is then counted at no less than its last measurement (lib/db/quotas).
    // pg_largeobject is not counted (large objects belong to roles, not schemas).
    sql: `
      CREATE TABLE _dbadmin.tenant_quotas (
        schema_name          text PRIMARY KEY,
        statement_timeout_ms integer CHECK (statement_timeout_ms > 0),
        connection_limit     integer CHECK (connection_limit >= 0),
        storage_bytes        bigint CHECK (storage_bytes > 0),
        used_bytes           bigint,
        measured_at          timestamptz,
        updated_at           timestamptz NOT NULL DEFAULT pg_catalog.now()
      );
      CREATE FUNCTION _dbadmin.relation_size(rel pg_catalog.oid) RETURNS pg_catalog.int8
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '50ms' AS $fn$
      BEGIN
        RETURN coalesce(pg_catalog.pg_total_relation_size(rel), 0);
      EXCEPTION WHEN lock_not_available THEN
        RETURN -1;
      END
      $fn$;
      REVOKE ALL ON FUNCTION _dbadmin.relation_size(oid) FROM PUBLIC`,
  },
  {
    id: 11,
    name: 'printed default',
    // A column's default as pg_get_expr prints it, or null where it cannot: a constant of a row
    // type whose table has changed since (lib/admin/structure). A lock wait that ended is still
    // the caller's 409; anything else PostgreSQL raises while printing is that one default's.
    sql: `
      CREATE FUNCTION _dbadmin.printed_default(expr pg_catalog.pg_node_tree) RETURNS pg_catalog.text
        LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
      BEGIN
        RETURN pg_catalog.pg_get_expr(expr, 0);
      EXCEPTION
        WHEN lock_not_available THEN RAISE;
        WHEN OTHERS THEN RETURN NULL;
      END
      $fn$;
      REVOKE ALL ON FUNCTION _dbadmin.printed_default(pg_node_tree) FROM PUBLIC`,
  },
  {
    id: 12,
    name: 'audit inbox',
    // Where a change's entry is written in the change's own transaction (lib/db/audit-log): a
    // plain row, no index, no function call, the cheapest write PostgreSQL has. Anyone may add a
    // row, naming only its entry (at most 256 KiB: an entry keeps 16 KiB of SQL text) and seal;
    // its time, its transaction and its writer are the database's own (column defaults the writer
    // has no privilege to set). Nobody but the service reads, changes or deletes one. The service
    // moves rows into _dbadmin.audit_log in batches (lib/db/audit-inbox), checking each seal against
    // the key and the transaction it names against the one that wrote the row, so a forged or
    // replayed row is refused there, and its writer named in the service's log.
    sql: `
      CREATE TABLE _dbadmin_audit.inbox (
        entry  text NOT NULL CHECK (pg_catalog.octet_length(entry) <= 262144),
        seal   text NOT NULL CHECK (pg_catalog.octet_length(seal) = 64),
        at     timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
        xact   pg_catalog.xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
        writer pg_catalog.name NOT NULL DEFAULT session_user
      );
      REVOKE ALL ON _dbadmin_audit.inbox FROM PUBLIC;
      GRANT INSERT (entry, seal) ON _dbadmin_audit.inbox TO PUBLIC`,
  },
  {
    id: 13,
    name: 'prepared schema roles',
    // Which of a schema's roles were prepared (made, granted, given their derived password): a
    // process that finds its role here logs in directly. Anything that changes the roles empties
    // the list (lib/db/schema-roles unprepareRoles). prepared_for: what they were prepared for
    // (the schema's oid, the secret's tag, the code's version); a change to it means prepared again.
    sql: `ALTER TABLE _dbadmin.schema_locks
            ADD COLUMN prepared text[] NOT NULL DEFAULT '{}',
            ADD COLUMN prepared_for text`,
  },
  {
    id: 14,
    name: 'import commits known by their transaction',
    // An import's commit (lib/admin/import-sessions) records the transaction that writes its rows
    // before it writes any, so PostgreSQL tells what became of a commit whose process died
    // (pg_xact_status): still running, or ended without committing, and then nothing was written.
    // That transaction runs as a schema's role, which cannot touch _dbadmin: it marks its import
    // committed through a door here, with the rows it wrote, so the rows and the record of them
    // commit together. Any login may call the door; it marks only the import whose commit
    // recorded the very transaction calling it, once. interrupted_xid: the commit found ended
    // without committing, said when the import is read, until the next commit begins.
    sql: `
      ALTER TABLE _dbadmin.import_sessions
        ADD COLUMN commit_xid      pg_catalog.xid8,
        ADD COLUMN interrupted_xid pg_catalog.xid8;
      CREATE FUNCTION _dbadmin_audit.import_committed(import_id pg_catalog.uuid, import_outcome pg_catalog.text)
        RETURNS pg_catalog.bool
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      BEGIN
        UPDATE _dbadmin.import_sessions s
           SET state = 'committed', outcome = import_outcome::pg_catalog.jsonb
         WHERE s.id = import_id AND s.state = 'committing'
           AND s.commit_xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id();
        IF NOT FOUND THEN
          RETURN false;
        END IF;
        DELETE FROM _dbadmin.import_parts p WHERE p.session_id = import_id;
        RETURN true;
      END
      $fn$;
      REVOKE ALL ON FUNCTION _dbadmin_audit.import_committed(pg_catalog.uuid, pg_catalog.text) FROM PUBLIC;
      GRANT EXECUTE ON FUNCTION _dbadmin_audit.import_committed(pg_catalog.uuid, pg_catalog.text) TO PUBLIC`,
  },
  {
    id: 15,
    name: 'idempotency keys',
    // One row per Idempotency-Key (lib/http/idempotency): claimed by the service before the
    // write, its answer (at most 64 KiB) recorded after. Only the service reads or writes it
    // (tenants have no right in _dbadmin): no tenant reads another principal's answer or plants
    // one for the admin to replay. Logged, not UNLOGGED: a crash must not forget a key whose
    // write it kept. schema_name, key_id: whose records go when a schema or a key is deleted.
    //
    // The write's own transaction, a tenant role's, binds itself to the claim through the door
    // below, in the round trip of its COMMIT: the door locks the row, checks the claim is still
    // the request's, and records the transaction in bound_xid, so the record says the change
    // committed exactly when it did. A claim taken over or released meanwhile makes the door
    // raise, and the write rolls back: a request the service gave up on never commits after its
    // retry ran. The claim (a random uuid) is never sent in text a tenant's code can read: the
    // door takes SHA-256 of the claim and the very transaction calling it, which a copy of the
    // call in any other transaction cannot match. Any login may call it.
    sql: `
      CREATE TABLE _dbadmin.idempotency_keys (
        scope       bytea PRIMARY KEY,
        fingerprint bytea NOT NULL,
        claim       uuid NOT NULL,
        state       text NOT NULL CHECK (state IN ('running', 'done', 'applied')),
        lease_until timestamptz NOT NULL,
        status      smallint,
        answer      text CHECK (pg_catalog.octet_length(answer) <= 65536),
        expires_at  timestamptz NOT NULL,
        bound_xid   pg_catalog.xid8,
        schema_name text,
        key_id      integer
      );
      CREATE INDEX ON _dbadmin.idempotency_keys (expires_at);
      CREATE INDEX ON _dbadmin.idempotency_keys (schema_name);
      CREATE INDEX ON _dbadmin.idempotency_keys (key_id);
      CREATE FUNCTION _dbadmin_audit.idempotency_bound(key_scope pg_catalog.bytea, claim_proof pg_catalog.bytea)
        RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      BEGIN
        UPDATE _dbadmin.idempotency_keys k
           SET bound_xid = pg_catalog.pg_current_xact_id()
         WHERE k.scope OPERATOR(pg_catalog.=) key_scope
           AND k.state OPERATOR(pg_catalog.=) 'running'
           AND pg_catalog.sha256(pg_catalog.convert_to(
                 k.claim::pg_catalog.text OPERATOR(pg_catalog.||) ' '
                 OPERATOR(pg_catalog.||) pg_catalog.pg_current_xact_id()::pg_catalog.text, 'UTF8'))
               OPERATOR(pg_catalog.=) claim_proof;
        IF NOT FOUND THEN
          RAISE EXCEPTION 'the Idempotency-Key of this request is no longer claimed by it'
            USING ERRCODE = '40001';
        END IF;
      END
      $fn$;
      REVOKE ALL ON FUNCTION _dbadmin_audit.idempotency_bound(pg_catalog.bytea, pg_catalog.bytea) FROM PUBLIC;
      GRANT EXECUTE ON FUNCTION _dbadmin_audit.idempotency_bound(pg_catalog.bytea, pg_catalog.bytea) TO PUBLIC`,
  },
  {
    id: 16,
    name: 'role shards',
    // The roles that make and administer tenants' roles, so that the service is a member of none
    // (lib/db/role-admin), and how many schemas' roles each holds; which one administers a
    // schema's is recorded with the schema's lock row (PostgreSQL 15 lets a role grant and revoke
    // membership in itself, so its catalog cannot say). Only the service reads or writes them.
    sql: `
      CREATE TABLE _dbadmin.role_shards (
        shard   text PRIMARY KEY,
        schemas integer NOT NULL DEFAULT 0 CHECK (schemas >= 0)
      );
      ALTER TABLE _dbadmin.schema_locks ADD COLUMN role_shard text`,
  },
  {
    id: 17,
    name: 'people',
    // The people who administer dbadmin (lib/admin/people), their console sessions (and the AUTH_USER
    // administrator's) and personal tokens; secrets are kept only as digests (SHA-256 of 256 random bits; a password as scrypt).
    // A person's role and scope are read with every request, so a change counts on the next one.
    // The audit log names the person: actor 'person', with their id and login as they were then.
    sql: `
      CREATE TABLE _dbadmin.people (
        id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        login         text NOT NULL UNIQUE CHECK (login ~ '^[a-z0-9][a-z0-9._@+-]{0,99}$'),
        display_name  text NOT NULL CHECK (pg_catalog.length(display_name) BETWEEN 1 AND 200),
        role          text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'analyst')),
        schemas       text[] CHECK (schemas IS NULL OR pg_catalog.cardinality(schemas) > 0),
        password_hash text,
        sso_issuer    text,
        sso_subject   text,
        created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
        updated_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
        UNIQUE (sso_issuer, sso_subject)
      );
      -- person_id NULL: a session of AUTH_USER's administrator, valid while AUTH_USER and AUTH_PASS
      -- are the ones it signed in with (admin_digest: SHA-256 of the two, as lib/http/authenticate).
      CREATE TABLE _dbadmin.person_sessions (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        person_id    integer REFERENCES _dbadmin.people ON DELETE CASCADE,
        admin_digest bytea CHECK ((person_id IS NULL) = (admin_digest IS NOT NULL)),
        token_hash   bytea NOT NULL UNIQUE,
        via          text NOT NULL CHECK (via IN ('password', 'sso')),
        created_at   timestamptz NOT NULL,
        last_seen_at timestamptz NOT NULL,
        idle_until   timestamptz NOT NULL,
        ends_at      timestamptz NOT NULL,
        address      text,
        user_agent   text
      );
      CREATE INDEX ON _dbadmin.person_sessions (person_id);
      CREATE TABLE _dbadmin.person_tokens (
        id           integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        person_id    integer NOT NULL REFERENCES _dbadmin.people ON DELETE CASCADE,
        name         text NOT NULL CHECK (pg_catalog.length(name) BETWEEN 1 AND 100),
        token_hash   bytea NOT NULL UNIQUE,
        token_prefix text NOT NULL,
        role         text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'analyst')),
        schemas      text[],
        created_at   timestamptz NOT NULL,
        expires_at   timestamptz NOT NULL,
        last_used_at timestamptz,
        UNIQUE (person_id, name)
      );
      CREATE TABLE _dbadmin.person_invitations (
        token_hash bytea PRIMARY KEY,
        person_id  integer NOT NULL REFERENCES _dbadmin.people ON DELETE CASCADE,
        expires_at timestamptz NOT NULL
      );
      ALTER TABLE _dbadmin.audit_log DROP CONSTRAINT audit_log_actor_check;
      ALTER TABLE _dbadmin.audit_log ADD CHECK (actor IN ('admin', 'key', 'person', 'public')),
        ADD COLUMN person_id integer, ADD COLUMN person_login text, ADD COLUMN via text;
      CREATE INDEX ON _dbadmin.audit_log (person_id, seq) WHERE person_id IS NOT NULL;
      CREATE OR REPLACE FUNCTION _dbadmin_audit.append(entry pg_catalog.text, seal pg_catalog.text) RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      DECLARE
        k pg_catalog.bytea := (SELECT s.key FROM _dbadmin.audit_seal s);
        e pg_catalog.jsonb;
      BEGIN
        IF entry IS NULL OR seal IS NULL OR seal !~ '^[0-9a-f]{64}$'
           OR pg_catalog.sha256(pg_catalog.decode(seal, 'hex'))
              IS DISTINCT FROM pg_catalog.sha256(pg_catalog.sha256(k || pg_catalog.sha256(k || pg_catalog.convert_to(entry, 'UTF8'))))
        THEN
          RAISE EXCEPTION 'audit entry refused: its seal does not match' USING ERRCODE = '42501';
        END IF;
        e := entry::pg_catalog.jsonb;
        IF e ? 'xid' AND (e->>'xid')::pg_catalog.xid8 IS DISTINCT FROM pg_catalog.pg_current_xact_id() THEN
          RAISE EXCEPTION 'audit entry refused: it was sealed for another transaction' USING ERRCODE = '42501';
        END IF;
        INSERT INTO _dbadmin.audit_log (id, request_id, actor, key_id, key_name, key_type, person_id,
                                        person_login, via, schema_name, action, target, status, row_count,
                                        sql_kind, sql_fingerprint, sql_text, xact_id)
        VALUES ((e->>'id')::pg_catalog.uuid, e->>'requestId', e->>'actor', (e->>'keyId')::pg_catalog.int4,
                e->>'keyName', e->>'keyType', (e->>'personId')::pg_catalog.int4, e->>'personLogin',
                e->>'via', e->>'schema', e->>'action', e->>'target', (e->>'status')::pg_catalog.int2,
                (e->>'rows')::pg_catalog.int8, e->>'sqlKind', e->>'sqlFingerprint', e->>'sqlText',
                (e->>'xid')::pg_catalog.int8);
      END
      $fn$`,
  },
  {
    id: 18,
    name: 'single sign-on',
    // A sign-in attempt lives in its browser's cookie (sealed, lib/admin/sso); the digest of each
    // state used is kept until the attempt would have expired, so no answer is taken twice.
    // sso_managed: the person's role and scope come from their groups at the provider
    // (OIDC_ROLE_MAP), checked again at every sign-in.
    sql: `
      CREATE TABLE _dbadmin.sso_used (
        state_hash bytea PRIMARY KEY,
        expires_at timestamptz NOT NULL
      );
      ALTER TABLE _dbadmin.people ADD COLUMN sso_managed boolean NOT NULL DEFAULT false`,
  },
  {
    id: 19,
    name: 'schema templates',
    // Which template a schema was cloned from (lib/admin/clone), by name: the set a migration
    // across "every schema cloned from X" reaches, and what drift is measured against.
    sql: `
      CREATE TABLE _dbadmin.schema_templates (
        schema_name text PRIMARY KEY,
        template text NOT NULL,
        with_data boolean NOT NULL,
        cloned_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX schema_templates_template ON _dbadmin.schema_templates (template)`,
  },
  {
    id: 20,
    name: 'migrations across tenant schemas',
    // A migration (lib/admin/tenant-migrations): its SQL and how it runs, one row per schema it
    // reaches with that schema's state. A run's claim (claim, claimed_until) and the transaction it
    // ran in (xact_id) say, after a crash, whether the schema's change committed. schema_migrations
    // is each schema's own ledger by name: what a migration of that name already did there.
    sql: `
      CREATE TABLE _dbadmin.tenant_migrations (
        id bigserial PRIMARY KEY,
        name text NOT NULL UNIQUE,
        sql text NOT NULL,
        sql_hash text NOT NULL,
        run_as text NOT NULL CHECK (run_as IN ('schema', 'admin')),
        lock_timeout_ms integer NOT NULL,
        concurrency integer NOT NULL,
        target jsonb NOT NULL,
        created_by text,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE _dbadmin.tenant_migration_schemas (
        migration_id bigint NOT NULL REFERENCES _dbadmin.tenant_migrations (id) ON DELETE CASCADE,
        schema_name text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'running', 'applied', 'failed', 'skipped')),
        reason text,
        sqlstate text,
        attempts integer NOT NULL DEFAULT 0,
        claim uuid,
        claimed_until timestamptz,
        xact_id xid8,
        started_at timestamptz,
        finished_at timestamptz,
        PRIMARY KEY (migration_id, schema_name)
      );
      CREATE INDEX tenant_migration_schemas_state ON _dbadmin.tenant_migration_schemas (migration_id, state);
      CREATE TABLE _dbadmin.schema_migrations (
        schema_name text NOT NULL,
        migration_name text NOT NULL,
        sql_hash text NOT NULL,
        migration_id bigint,
        applied_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (schema_name, migration_name)
      )`,
  },
  {
    id: 21,
    name: 'tenant bundles',
    // A tenant's bundle (lib/admin/bundle): a backup made here, waiting to be downloaded, or a
    // restore being sent here, with its parts. Unlogged like an import's: a crash loses only what
    // can be made or sent again. The manifest is signed (lib/admin/bundle-format).
    sql: `
      CREATE UNLOGGED TABLE _dbadmin.bundles (
        id          uuid PRIMARY KEY,
        kind        text NOT NULL CHECK (kind IN ('backup', 'restore')),
        schema_name text NOT NULL,
        -- A backup's schema by oid too: a schema dropped and made again under its name is another.
        schema_oid  oid,
        owner       text NOT NULL,
        state       text NOT NULL CHECK (state IN ('writing', 'ready', 'open', 'restored')),
        manifest    jsonb,
        options     jsonb,
        outcome     jsonb,
        created_at  timestamptz NOT NULL,
        expires_at  timestamptz NOT NULL
      );
      CREATE INDEX bundles_schema ON _dbadmin.bundles (schema_name, kind);
      CREATE INDEX bundles_expiry ON _dbadmin.bundles (expires_at);
      CREATE UNLOGGED TABLE _dbadmin.bundle_parts (
        bundle_id uuid NOT NULL REFERENCES _dbadmin.bundles ON DELETE CASCADE,
        part      integer NOT NULL,
        bytes     bytea NOT NULL,
        PRIMARY KEY (bundle_id, part)
      );
      -- Stored as they come: compressing 4 MiB parts on every write and read costs more than it saves.
      ALTER TABLE _dbadmin.bundle_parts ALTER COLUMN bytes SET STORAGE EXTERNAL`,
  },
  {
    id: 22,
    name: 'sql history and snippets',
    // The SQL editor's history, per person (person_id NULL: AUTH_USER's administrator), the last
    // HISTORY_KEPT runs each (lib/admin/sql-history), gone with the person. Snippets are named SQL
    // kept by whoever saved it (owner as lib/principal ownerOf says) and, shared, read by the team
    // (people whose scope holds the snippet's schema); a person's snippets outlive them.
    sql: `
      CREATE TABLE _dbadmin.sql_history (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        person_id   integer REFERENCES _dbadmin.people ON DELETE CASCADE,
        schema_name text NOT NULL,
        sql         text NOT NULL,
        cut         boolean NOT NULL,
        ran_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
        duration_ms integer,
        ok          boolean NOT NULL,
        row_count   bigint,
        error       text
      );
      CREATE INDEX sql_history_person ON _dbadmin.sql_history ((coalesce(person_id, 0)), id);
      CREATE TABLE _dbadmin.sql_snippets (
        id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        owner       text NOT NULL,
        author      text NOT NULL,
        name        text NOT NULL CHECK (pg_catalog.length(name) BETWEEN 1 AND 200),
        sql         text NOT NULL,
        schema_name text,
        shared      boolean NOT NULL DEFAULT false,
        created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
        updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
        UNIQUE (owner, name)
      );
      CREATE INDEX sql_snippets_shared ON _dbadmin.sql_snippets (name) WHERE shared`,
  },
];

/** Where a set of migrations keeps its record (`<schema>.migrations`). */
export interface MigrationTarget {
  schema: string;
}

export const INTERNAL_TARGET: MigrationTarget = { schema: INTERNAL_SCHEMA };

const DUPLICATE = new Set(['23505', '42P06', '42P07']);

/** The schema and its ledger; two cold starts racing here both succeed. */
async function ensureLedger(client: pg.ClientBase, schema: string, retry = true): Promise<void> {
  try {
    await client.query(`
      CREATE SCHEMA IF NOT EXISTS ${schema};
      CREATE TABLE IF NOT EXISTS ${schema}.migrations (
        id         integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
  } catch (error) {
    if (!(retry && isPgError(error) && DUPLICATE.has(error.code))) throw error;
    await ensureLedger(client, schema, false);
  }
}

const appliedIds = async (client: pg.ClientBase, schema: string) =>
  new Set(
    (await client.query<{ id: number }>(`SELECT id FROM ${schema}.migrations`)).rows.map((row) => row.id),
  );

/**
 * Brings a schema (by default `_dbadmin`) up to date: the pending migrations and their records
 * commit together, under a lock on the ledger table, so concurrent cold starts apply each once.
 * Not an advisory lock: any login may take one of those, and hold it to stop the service.
 */
export async function migrate(
  client: pg.ClientBase,
  migrations: readonly Migration[] = MIGRATIONS,
  target: MigrationTarget = INTERNAL_TARGET,
): Promise<number[]> {
  // Our own schema names, never a caller's: _dbadmin starts with an underscore on purpose.
  const schema = quoteCatalogName(target.schema);
  await ensureLedger(client, schema);
  // Up to date (every cold start but the first after an upgrade): no lock taken at all.
  const known = await appliedIds(client, schema);
  if (migrations.every((migration) => known.has(migration.id))) return [];
  return inTransaction(client, async () => {
    await client.query(`LOCK TABLE ${schema}.migrations IN SHARE ROW EXCLUSIVE MODE`);
    const done = await appliedIds(client, schema);
    const applied: number[] = [];
    for (const migration of migrations) {
      if (done.has(migration.id)) continue;
      await client.query(migration.sql);
      await client.query(`INSERT INTO ${schema}.migrations (id, name) VALUES ($1, $2)`, [
        migration.id,
        migration.name,
      ]);
      applied.push(migration.id);
    }
    return applied;
  });
}
