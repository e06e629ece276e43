/** A result already rendered as JSON by PostgreSQL (the JSON export, structure); lib/http sends it as it is. */
export class JsonText {
  constructor(readonly body: string) {}
}
