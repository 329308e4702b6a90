import { html, Html } from './html';
import { layout, ViewContext } from './layout';
import { ResolvedDashboardOptions } from '../dashboard.options';

/** A page that says what happened and where to go next: a refused or failed action, a missing task. */
export function messagePage(
  context: ViewContext,
  page: { title: string; message: string; code?: string; next: Array<[label: string, href: string]> },
): Html {
  return layout(context, {
    title: page.title,
    body: html`<h1>${page.title}</h1>
<p class="notice error" role="alert">${page.code && html`<code>${page.code}</code> `}${page.message}</p>
<p class="actions">${page.next.map(([label, href]) => html`<a class="button secondary" href="${href}">${label}</a>`)}</p>`,
  });
}

/**
 * What a refused request sees: the guard's own message, and the way to sign in. Nothing of the
 * dashboard is shown, not even its links (their mount is only known past the guards).
 */
export function refusedPage(
  options: Pick<ResolvedDashboardOptions, 'title' | 'loginUrl'>,
  page: { status: number; message: string; retry: string | undefined },
): Html {
  const title =
    page.status === 401
      ? 'Sign-in needed'
      : page.status === 403
        ? 'Not allowed'
        : page.status >= 500
          ? 'The dashboard could not answer'
          : 'Request refused';
  const signIn = options.loginUrl !== undefined && (page.status === 401 || page.status === 403);
  return layout(
    { links: null, options },
    {
      title,
      body: html`<h1>${title}</h1>
<p class="notice error" role="alert">${page.message}</p>
<p class="actions">
  ${signIn && html`<a class="button" href="${options.loginUrl}">Sign in</a>`}
  ${page.retry && html`<a class="button secondary" href="${page.retry}">Try again</a>`}
</p>`,
    },
  );
}
