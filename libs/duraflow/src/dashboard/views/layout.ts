import { DASHBOARD_CLIENT_SCRIPT } from '../assets/client-script';
import { DASHBOARD_STYLESHEET } from '../assets/stylesheet';
import { DashboardLinks } from '../dashboard-links';
import { ResolvedDashboardOptions } from '../dashboard.options';
import { html, Html, HtmlValue } from './html';

/** What every page is rendered with: the request's links, the options, one "now". */
export interface ViewContext {
  links: DashboardLinks;
  options: ResolvedDashboardOptions;
  now: Date;
}

export type Section = 'overview' | 'tasks' | 'dead-letters' | 'events';

const STYLE = new Html(DASHBOARD_STYLESHEET);
const SCRIPT = new Html(DASHBOARD_CLIENT_SCRIPT);

/** A whole page. `context` is null on a page a guard refused (no navigation is offered there). */
export function layout(
  context: Pick<ViewContext, 'links' | 'options'> | { links: null; options: Pick<ResolvedDashboardOptions, 'title' | 'loginUrl'> },
  page: { title: string; section?: Section; body: HtmlValue },
): Html {
  const { links, options } = context;
  const current = (section: Section) => (page.section === section ? 'page' : false);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<link rel="icon" href="data:,">
<title>${page.title} · ${options.title}</title>
<style>${STYLE}</style>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  ${links ? html`<a class="brand" href="${links.home()}">${options.title}</a>` : html`<span class="brand">${options.title}</span>`}
  <nav aria-label="Dashboard">
    ${
      links &&
      html`<a href="${links.overview()}" ${ariaCurrent(current('overview'))}>Overview</a>
    <a href="${links.home()}" ${ariaCurrent(current('tasks'))}>Tasks</a>
    <a href="${links.deadLetters()}" ${ariaCurrent(current('dead-letters'))}>Dead letters</a>
    <a href="${links.events()}" ${ariaCurrent(current('events'))}>Events</a>`
    }
  </nav>
  ${options.loginUrl && html`<a href="${options.loginUrl}">Sign in</a>`}
</header>
<main id="main" tabindex="-1">
${page.body}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function ariaCurrent(value: string | false): Html {
  return value ? html`aria-current="${value}"` : html``;
}

/** A status as a coloured badge (`rolled_back` reads "rolled back"). */
export function statusBadge(status: string): Html {
  return html`<span class="badge s-${status}">${status.replace(/_/g, ' ')}</span>`;
}
