import { readFileSync } from 'node:fs';
import { Page } from 'puppeteer-core';

// What the callbacks run inside the page see (this project compiles without the DOM's types).
declare const window: any;

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** One rule axe-core found broken on a page, with the elements that break it. */
export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core (WCAG 2.1 A and AA, and its best practices) in the page as it is now, and returns
 * the serious and critical violations. The source is evaluated through the DevTools protocol,
 * which the page's Content-Security-Policy does not govern: the page itself keeps its policy.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations: AxeViolation[] = await page.evaluate(async () => {
    const result = await window.axe.run(window.document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
    });
    return result.violations.map((violation: any) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      targets: violation.nodes.slice(0, 5).map((node: any) => String(node.target)),
    }));
  });
  return violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
}

/** The page in the light and then the dark colour scheme (prefers-color-scheme), each checked by axe. */
export async function violationsInBothSchemes(page: Page): Promise<Record<'light' | 'dark', AxeViolation[]>> {
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
  const light = await seriousViolations(page);
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
  const dark = await seriousViolations(page);
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
  return { light, dark };
}
