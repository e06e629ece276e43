import type { Principal } from '#lib/principal';

/** A request as its route parsed it, and who sent it. */
export interface RequestInput {
  params?: unknown;
  query?: unknown;
  body?: unknown;
  principal: Principal | undefined;
}

export const field = (value: unknown, name: string): unknown =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;

const firstString = (...values: unknown[]) => values.find((v): v is string => typeof v === 'string');

/** Every schema the request names, where routes name one: its path, its query, its body. */
export function namedSchemas({ params, query, body }: RequestInput): string[] {
  return [
    field(params, 'schema'),
    field(params, 'schemaName'),
    field(body, 'schemaName'),
    field(query, 'schema'),
    field(body, 'schema'),
  ].filter((v): v is string => typeof v === 'string');
}

/** The schema the request acts in, as it named it, else its key's own. */
export function requestSchema(input: RequestInput): string | undefined {
  return firstString(
    ...namedSchemas(input),
    input.principal?.kind === 'key' ? input.principal.schema : undefined,
  );
}
