/** The host's ceiling: a handler with no middleware, no config, no database. */
export const handler = async () => ({
  statusCode: 200,
  headers: { 'content-type': 'application/json' },
  body: '{"ok":true}',
});
