import { BenchSizes } from './config';
import { BenchDatabase } from './database';
import { BenchResults } from './report';

/** What every scenario gets: the bench database, its sizes, and where it puts its figures. */
export interface BenchContext {
  db: BenchDatabase;
  sizes: BenchSizes;
  quick: boolean;
  results: BenchResults;
  /** Raw measurements, by scenario, written to the JSON file. */
  raw: Record<string, Record<string, unknown>>;
  /** Printed after the table (the claim plan). */
  appendix: string[];
}

/** The raw-measurement section of a scenario, created on first use. */
export function rawSection(ctx: BenchContext, scenario: string): Record<string, unknown> {
  return (ctx.raw[scenario] ??= {});
}
