/** What `advanceTime` takes: milliseconds, or a number with a unit ('1500ms', '90s', '15m', '25h', '30d', '2w'). */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd' | 'w'}`;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** A duration in milliseconds; throws a TypeError that says what is accepted. */
export function durationMs(duration: Duration): number {
  if (typeof duration === 'number') {
    if (Number.isFinite(duration) && duration >= 0) return duration;
  } else {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$/.exec(String(duration).trim());
    if (match) return Math.round(Number(match[1]) * UNIT_MS[match[2]]);
  }
  throw new TypeError(
    `Not a duration: ${String(duration)}. Pass milliseconds (a number >= 0) or a string such as '1500ms', '90s', '15m', '25h', '30d'.`,
  );
}
