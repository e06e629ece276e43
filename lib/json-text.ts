/**
 * The most UTF-8 bytes JSON.stringify writes for one UTF-16 unit of a string: a `\u` escape and four
 * hex digits (a control character, a lone surrogate).
 */
export const JSON_BYTES_PER_UNIT_AT_MOST = 6;

/** A result already rendered as JSON by PostgreSQL (the JSON export, structure); lib/http sends it as it is. */
export class JsonText {
  constructor(readonly body: string) {}
}
