/**
 * What a terminal acts on instead of showing: the C0 controls (ESC opens the sequences that
 * retitle a window, clear the screen or rewrite the clipboard; CR and BS overwrite what was
 * printed), DEL, the C1 controls (U+0080–U+009F, CSI and OSC among them), and the
 * bidirectional marks, embeddings, overrides and isolates, which reorder what is shown.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const TERMINAL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `value` as text that a terminal shows as it is: each control character as a `\uXXXX` escape
 * (which is also a valid escape inside a JSON string, so a JSON text stays JSON), a line break
 * included. Every value the CLI prints that comes from the database or a file (workflow names,
 * concurrency keys, step keys, messages) goes through here: the data was submitted by callers,
 * and the terminal is the operator's.
 */
export function terminalText(value: unknown): string {
  return String(value).replace(TERMINAL_CONTROLS, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Several lines of the CLI's own (the usage, a table), each line made safe, the line breaks between them kept. */
export function terminalLines(text: string): string {
  return text.split('\n').map(terminalText).join('\n');
}
