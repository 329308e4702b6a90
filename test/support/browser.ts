import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { Browser } from 'puppeteer-core';

/** Debian's chromium package (`.ci/run` installs it when missing). */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/**
 * The flags a headless Chromium needs on a machine without network or GPU: without the
 * background-networking ones it waits on the closed network (component updates, sync, QUIC).
 */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  browser: Browser;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile of its own (no cookies or cache from another run). */
export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'duraflow-chromium-'));
  try {
    const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, userDataDir: profile, args: FLAGS });
    return {
      browser,
      close: async () => {
        await browser.close().catch(() => undefined);
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(profile, { recursive: true, force: true });
    throw error;
  }
}
