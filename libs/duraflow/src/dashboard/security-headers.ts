import { createHash } from 'node:crypto';
import { DASHBOARD_CLIENT_SCRIPT } from './assets/client-script';
import { DASHBOARD_STYLESHEET } from './assets/stylesheet';

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

/**
 * On every dashboard response. The policy allows exactly the inlined stylesheet and script (by
 * hash) and nothing from anywhere else, so an injected tag could neither run nor load; forms
 * post only to this origin; no other site may frame the pages (a framed "Confirm" button could
 * be clicked through a decoy); nothing is cached, as the pages show live state behind guards.
 */
export const DASHBOARD_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': [
    `default-src 'none'`,
    `style-src ${sha256(DASHBOARD_STYLESHEET)}`,
    `script-src ${sha256(DASHBOARD_CLIENT_SCRIPT)}`,
    `connect-src 'self'`,
    `img-src 'self' data:`,
    `form-action 'self'`,
    `frame-ancestors 'none'`,
    `base-uri 'none'`,
  ].join('; '),
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

export const HTML_CONTENT_TYPE = 'text/html; charset=utf-8';
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
