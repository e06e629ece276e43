import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { asTenant, RECORD, sightings, tenantSchema } from '#test/security/tenant';
import { call } from '#test/support/http';

/**
 * The JSON export is rendered by PostgreSQL on a session of the schema's role, whose search path
 * is the tenant's schema. A function a tenant creates there under a pg_catalog name, for argument
 * types that fit better than pg_catalog's (polymorphic, record), would be picked by an unqualified
 * call: it could rewrite the export and would run at every row. The export names pg_catalog's.
 */

afterAll(closePool);

/** Functions named like those a JSON renderer calls, each answering "planted" and recording its run. */
const plantRenderers = (schema: string) => {
  const planted = (signature: string) => `
    CREATE FUNCTION "${schema}".${signature} RETURNS json LANGUAGE plpgsql AS $$
    BEGIN ${RECORD(schema)}; RETURN '"planted"'; END $$;`;
  return `
    ${planted('to_json(bigint)')} ${planted('to_json(text)')} ${planted('to_json(numeric)')}
    ${planted('to_json(timestamptz)')} ${planted('to_json(typed)')} ${planted('row_to_json(typed)')}
    CREATE FUNCTION "${schema}".to_jsonb(typed) RETURNS jsonb LANGUAGE sql AS $$ SELECT '"planted"'::jsonb $$;
    CREATE FUNCTION "${schema}".to_jsonb(text) RETURNS jsonb LANGUAGE sql AS $$ SELECT '"planted"'::jsonb $$;
    CREATE FUNCTION "${schema}".collect(json, typed) RETURNS json LANGUAGE sql AS $$ SELECT '"planted"'::json $$;
    CREATE AGGREGATE "${schema}".json_agg(typed) (SFUNC = "${schema}".collect, STYPE = json);
    CREATE FUNCTION "${schema}".to_char(timestamptz, text) RETURNS text LANGUAGE sql AS $$ SELECT 'planted' $$;
    CREATE FUNCTION "${schema}".timezone(text, timestamptz) RETURNS timestamp LANGUAGE sql
      AS $$ SELECT '1999-01-01'::timestamp $$;
    CREATE FUNCTION "${schema}".format(text, anyelement) RETURNS text LANGUAGE plpgsql
      AS $$ BEGIN ${RECORD(schema)}; RETURN 'planted'; END $$;
    CREATE FUNCTION "${schema}".num_nonnulls(anyelement) RETURNS int LANGUAGE plpgsql
      AS $$ BEGIN ${RECORD(schema)}; RETURN 1; END $$;`;
};

describe('the JSON export uses no function a tenant planted', () => {
  it('renders the same values after a tenant plants to_json, to_jsonb, row_to_json, json_agg, to_char and format', async () => {
    const schema = await tenantSchema('exf');
    await asTenant(
      schema,
      `CREATE TYPE "${schema}".mood AS ENUM ('fine');
       CREATE TABLE "${schema}".typed (id serial PRIMARY KEY, big bigint, amount numeric(8,2), at timestamptz,
                                       ratio real, born date, name text, doc jsonb, feel "${schema}".mood);
       INSERT INTO "${schema}".typed (big, amount, at, ratio, born, name, doc, feel) VALUES
         (9007199254740993, 12.5, '2020-01-02 03:04:05.678+00', 0.5, '2020-02-29', 'first', '{"a": 1}', 'fine'),
         (42, NULL, '0044-03-15 12:00:00+00 BC', NULL, NULL, 'second', NULL, NULL)`,
    );
    const exportJson = () =>
      call(tables, { path: '/api/table/typed/export', query: { schema, format: 'json' } });
    const before = await exportJson();
    expect(before.body.data[0]).toEqual({
      id: 1,
      big: '9007199254740993',
      amount: '12.50',
      // In the database's time zone.
      at: expect.stringMatching(/^2020-01-0[12] \d\d:\d\d:05\.678[+-]\d\d/),
      ratio: '0.5',
      born: '2020-02-29',
      name: 'first',
      doc: '{"a": 1}',
      feel: 'fine',
    });

    await asTenant(schema, plantRenderers(schema));
    const after = await exportJson();

    expect(after.status).toBe(200);
    expect(after.text).toBe(before.text);
    expect(await sightings(schema)).toEqual([]);
  });
});
