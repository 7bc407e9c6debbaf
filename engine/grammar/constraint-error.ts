/**
 * Any problem with a grammar, a JSON schema, or a constrained output. `place` names where the
 * problem is (a rule name and line, a JSON pointer into the schema, a token position), so the
 * caller can show it to the user. Thrown before anything is queued, or when an output fails its
 * final check.
 */
export class ConstraintError extends Error {
  place?: string;
  constructor(message: string, place?: string) {
    super(place ? `${message} (at ${place})` : message);
    this.name = 'ConstraintError';
    this.place = place;
  }
}
