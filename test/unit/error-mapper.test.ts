import { z } from 'zod';
import { toApiError } from '#lib/http/error-mapper';

const pgError = (code: string, message: string, detail?: string) =>
  Object.assign(new Error(message), { code, detail, severity: 'ERROR' });

describe('toApiError', () => {
  it.each([
    ['42P01', 404, 'Table not found'],
    ['3F000', 404, 'Schema not found'],
    ['42601', 400, 'Invalid SQL'],
    ['22P02', 400, 'Invalid value'],
    ['42703', 400, 'Unknown column'],
    ['23505', 400, 'Duplicate value'],
    ['23502', 400, 'Missing value'],
    ['2BP01', 400, 'Dependent objects exist'],
    ['57014', 400, 'Query timeout'],
    ['22012', 400, 'Invalid value'],
    ['42P99', 400, 'Invalid SQL'],
    ['08006', 503, 'Database unavailable'],
    ['57P01', 503, 'Database unavailable'],
    ['53300', 503, 'Service busy'],
  ])('maps SQLSTATE %s to %i %s', (code, status, title) => {
    expect(toApiError(pgError(code, 'm'))).toMatchObject({ status, title });
  });

  it('keeps the database’s reason and detail in plain words for client errors', () => {
    const error = toApiError(pgError('23505', 'duplicate key value', 'Key (id)=(1) already exists.'));

    expect(error.message).toBe('duplicate key value (Key (id)=(1) already exists.)');
  });

  it.each([
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    ],
    ['a lost connection', new Error('Connection terminated unexpectedly')],
    [
      'several failed addresses',
      new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })]),
    ],
  ])('answers 503 Database unavailable for %s', (_, error) => {
    expect(toApiError(error)).toMatchObject({ status: 503, title: 'Database unavailable' });
  });

  it('answers 503 Service busy, with Retry-After, when every connection of the pool stayed in use', () => {
    const error = toApiError(new Error('timeout exceeded when trying to connect'));

    expect(error).toMatchObject({ status: 503, title: 'Service busy', headers: { 'Retry-After': '1' } });
    expect(error.message).toMatch(/in use; retry in a moment/);
  });

  it('answers 500 Service misconfigured when the database refuses our own login', () => {
    const error = toApiError(pgError('28P01', 'password authentication failed for user "shop_svc"'));

    expect(error).toMatchObject({ status: 500, title: 'Service misconfigured' });
    expect(error.message).not.toMatch(/shop_svc/);
  });

  it('answers 500 without internals for anything unexpected', () => {
    const error = toApiError(
      new TypeError("Cannot read properties of undefined (reading 'rows') at SELECT secret"),
    );

    expect(error.status).toBe(500);
    expect(error.message).not.toMatch(/SELECT|rows|TypeError/);
  });

  it('names the field and the rule for validation errors', () => {
    const schema = z.object({ tableName: z.string().min(3, 'table name must be at least 3 characters') });
    const error = toApiError(schema.safeParse({ tableName: 'ab' }).error);

    expect(error).toMatchObject({
      status: 400,
      title: 'Invalid table name',
      message: 'table name must be at least 3 characters',
    });
  });

  it('says a JSON object is expected when the body is something else', () => {
    const error = toApiError(z.object({ a: z.string() }).safeParse([1]).error);

    expect(error).toMatchObject({
      status: 400,
      title: 'Invalid request',
      message: 'request body must be a JSON object',
    });
  });
});
