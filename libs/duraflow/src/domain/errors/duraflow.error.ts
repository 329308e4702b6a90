/** The base of every error Duraflow throws on purpose; `code` is stable, the message says what to do. */
export abstract class DuraflowError extends Error {
  abstract readonly code: string;

  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }

  /**
   * The message for a caller outside the process (an API client): `message`, unless that names
   * more of the application than the caller asked about (the other registered workflows), which
   * only the logs and the developer see.
   */
  get publicMessage(): string {
    return this.message;
  }
}
