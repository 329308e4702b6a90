import { mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Page } from 'puppeteer-core';

/**
 * What the dashboard's browser tests do with a page as a person would: keyboard moves, and the
 * screenshots of docs/screenshots (written there with DURAFLOW_UPDATE_SCREENSHOTS=1, else in a
 * temporary folder so a test run never changes the docs).
 */

// What the callbacks run inside the page see (this project compiles without the DOM's types).
declare const document: any;
declare const window: any;

/** Where screenshots go: docs/screenshots when updating them, else a fresh temporary folder. */
export function screenshotsFolder(): string {
  const folder = process.env.DURAFLOW_UPDATE_SCREENSHOTS
    ? resolve(__dirname, '../../docs/screenshots')
    : mkdtempSync(join(tmpdir(), 'duraflow-screenshots-'));
  mkdirSync(folder, { recursive: true });
  return folder;
}

/**
 * The page in the light and the dark colour scheme (`<name>.png`, `<name>-dark.png`), after two
 * frames so the scheme is painted; the viewport only unless `fullPage`. Ends in the light scheme.
 */
export async function screenshotBothSchemes(page: Page, folder: string, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
    const path = join(folder, `${name}${scheme === 'dark' ? '-dark' : ''}.png`);
    await page.evaluate(() => new Promise((painted) => window.requestAnimationFrame(() => window.requestAnimationFrame(painted))));
    await page.screenshot({ path, fullPage: options.fullPage ?? false });
    expect(statSync(path).size).toBeGreaterThan(1000);
  }
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
}

/** Presses Tab until the focused element matches `selector` (what a keyboard user does). */
export async function tabTo(page: Page, selector: string, most = 120): Promise<void> {
  for (let i = 0; i < most; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((wanted) => document.activeElement?.matches(wanted) ?? false, selector)) return;
  }
  throw new Error(`${most} presses of Tab never reached ${selector}`);
}

/** Presses Enter on the focused control and waits for the page it leads to; its HTTP status. */
export async function pressEnter(page: Page): Promise<number | undefined> {
  const [response] = await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.keyboard.press('Enter')]);
  return response?.status();
}
