/** The base of every error Duraflow throws on purpose; `code` is stable, the message says what to do. */
export abstract class DuraflowError extends Error {
  abstract readonly code: string;

  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
