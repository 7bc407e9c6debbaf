// The error every host adapter shows for bad node parameters or bad msg/item input. It names the
// parameter so the user can find it in the editor.

export class ParameterError extends Error {
  constructor(
    readonly parameter: string,
    problem: string,
  ) {
    super(`${parameter}: ${problem}`);
    this.name = 'ParameterError';
  }
}
