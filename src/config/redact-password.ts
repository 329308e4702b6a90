/** The URL with its password replaced by `***`, for logs and error messages. */
export function redactPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}
