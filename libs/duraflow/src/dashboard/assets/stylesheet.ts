/**
 * The dashboard's only stylesheet, inlined in every page (and allowed by its hash in the
 * Content-Security-Policy): nothing to fetch, so a page a guard refused is styled too.
 */
export const DASHBOARD_STYLESHEET = `
:root {
  color-scheme: light dark;
  --bg: #f7f7f5; --panel: #ffffff; --text: #1d2125; --muted: #5d6670; --line: #d9dcdf; --accent: #1f5fbf;
  --ok: #1d7a3b; --bad: #b3261e; --warn: #9a5b00; --wait: #4d5a66; --run: #1f5fbf; --undo: #7a3fb3;
  --focus: #ffbf47;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 15px; line-height: 1.45;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #15181b; --panel: #1d2125; --text: #e6e8ea; --muted: #9aa4ae; --line: #343a40; --accent: #7fb0ff;
    --ok: #5cc27f; --bad: #ff8a80; --warn: #f0b45a; --wait: #aab4be; --run: #7fb0ff; --undo: #c59bf0; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); }
a { color: var(--accent); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible, main:focus-visible {
  outline: 3px solid var(--focus); outline-offset: 2px;
}
.skip { position: absolute; left: -9999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--panel); padding: .5rem; z-index: 2; }
header.top { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.25rem; background: #14243b; color: #fff; }
header.top a { color: #fff; text-decoration: none; }
header.top a:hover, header.top a[aria-current="page"] { text-decoration: underline; }
header.top .brand { font-weight: 700; letter-spacing: .02em; }
header.top nav { display: flex; gap: 1rem; flex: 1; }
main { padding: 1rem 1.25rem 3rem; max-width: 1400px; margin: 0 auto; }
h1 { font-size: 1.35rem; margin: .4rem 0 .8rem; display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; }
h2 { font-size: 1.1rem; margin: 1.6rem 0 .6rem; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .8rem 1rem; }
.muted { color: var(--muted); }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .88em; }
pre { margin: .3rem 0; padding: .5rem .6rem; background: var(--bg); border: 1px solid var(--line); border-radius: 4px;
  white-space: pre-wrap; word-break: break-all; max-height: 24rem; overflow: auto; }
table { border-collapse: collapse; width: 100%; background: var(--panel); }
th, td { text-align: left; padding: .4rem .55rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); background: var(--panel); }
tbody tr:hover { background: color-mix(in srgb, var(--accent) 6%, transparent); }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600;
  border: 1px solid currentColor; white-space: nowrap; }
.s-completed, .s-rolled_back { color: var(--ok); }
.s-failed, .s-partial_rollback { color: var(--bad); }
.s-running { color: var(--run); }
.s-pending { color: var(--wait); }
.s-cancelled, .s-held { color: var(--warn); }
.s-compensated { color: var(--undo); }
.counts { display: flex; gap: .5rem; flex-wrap: wrap; margin: .4rem 0 1rem; padding: 0; list-style: none; }
.counts a { display: flex; gap: .45rem; align-items: baseline; padding: .35rem .7rem; border: 1px solid var(--line);
  border-radius: 6px; background: var(--panel); text-decoration: none; color: var(--text); }
.counts a[aria-current="true"] { border-color: var(--accent); box-shadow: inset 0 0 0 1px var(--accent); }
.counts strong { font-size: 1.15rem; font-variant-numeric: tabular-nums; }
form.filters { display: flex; gap: .75rem; flex-wrap: wrap; align-items: end; margin-bottom: .5rem; }
form.filters label { display: flex; flex-direction: column; font-size: .8rem; color: var(--muted); gap: .15rem; }
form.filters label.check { flex-direction: row; align-items: center; gap: .35rem; padding-bottom: .4rem; }
input, select, button { font: inherit; padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 4px;
  background: var(--panel); color: var(--text); }
input[name="id"] { width: 22rem; }
button, .button { cursor: pointer; background: var(--accent); color: #fff; border: 1px solid var(--accent); text-decoration: none;
  display: inline-block; padding: .3rem .75rem; border-radius: 4px; }
.button.secondary, button.secondary { background: transparent; color: var(--accent); }
.button.danger, button.danger { background: var(--bad); border-color: var(--bad); color: #fff; }
.actions { display: flex; gap: .5rem; flex-wrap: wrap; margin: .6rem 0; }
.presets { font-size: .85rem; margin: 0 0 .8rem; }
dl.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(16rem, 1fr)); gap: .5rem 1.5rem; margin: 0; }
dl.facts div { min-width: 0; }
dl.facts dt { font-size: .75rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.notice { padding: .6rem .8rem; border-left: 4px solid var(--ok); background: var(--panel); margin: .5rem 0 1rem; }
.notice.error { border-color: var(--bad); }
.error-box { border-left: 4px solid var(--bad); }
details > summary { cursor: pointer; color: var(--accent); }
.values { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
@media (max-width: 900px) { .values { grid-template-columns: 1fr; } }
.timeline { font-size: .9rem; }
.timeline th, .timeline td { padding: .35rem .4rem; }
.timeline th { letter-spacing: 0; }
.timeline td.bar { width: 10%; min-width: 5rem; }
.table-wrap { overflow-x: auto; }
.timeline .values-cell { max-width: 21rem; }
.timeline td.key code { white-space: nowrap; }
.timeline td.key .kind { font-size: .8rem; }
.timeline td code.small { overflow-wrap: anywhere; }
.timeline details.value summary { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.timeline details.value[open] summary { white-space: normal; }
code.small { font-size: .8em; }
td time, td a.mono { white-space: nowrap; }
.timeline svg { width: 100%; height: 12px; display: block; }
.timeline rect.track { fill: var(--line); }
.timeline rect.span { fill: var(--accent); }
.timeline rect.span.failed { fill: var(--bad); }
.timeline .step-error { color: var(--bad); }
.live { font-size: .85rem; color: var(--muted); }
.pager { display: flex; gap: 1rem; margin-top: .8rem; }
.confirm { max-width: 46rem; }
@media (prefers-color-scheme: dark) {
  button, .button, button.danger, .button.danger { color: #111417; }
  button.secondary, .button.secondary { color: var(--accent); }
}
.s-paused { color: var(--warn); }
.s-active { color: var(--ok); }
nav.windows { display: flex; gap: 1rem; margin: 0 0 .6rem; }
nav.windows a[aria-current="page"] { font-weight: 700; text-decoration: none; color: var(--text); }
.counts li.stat { display: flex; gap: .45rem; align-items: baseline; padding: .35rem .7rem; border: 1px solid var(--line);
  border-radius: 6px; background: var(--panel); }
.counts li.stat strong { font-size: 1.15rem; font-variant-numeric: tabular-nums; }
.chart-row { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1rem; align-items: start; }
@media (max-width: 900px) { .chart-row { grid-template-columns: 1fr; } }
figure.chart { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .5rem; }
figure.chart svg { width: 100%; height: auto; display: block; }
.table-scroll { max-height: 17rem; overflow: auto; border: 1px solid var(--line); border-radius: 6px; }
.table-scroll:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
table.numbers { font-size: .85rem; }
table.numbers th, table.numbers td { padding: .2rem .45rem; }
svg .axis, svg .grid { stroke: var(--line); stroke-width: 1; }
svg .grid { stroke-dasharray: 3 3; }
svg text.tick { fill: var(--muted); font-size: 11px; }
svg .c-ok { fill: var(--ok); } svg .c-bad { fill: var(--bad); } svg .c-undo { fill: var(--undo); }
svg .c-warn { fill: var(--warn); } svg .c-run { fill: var(--run); } svg .c-wait { fill: var(--wait); }
svg polyline.line { fill: none; stroke-width: 2; }
svg polyline.c-run { stroke: var(--run); } svg polyline.c-warn { stroke: var(--warn); }
svg.spark { width: 120px; height: 28px; display: block; }
ul.legend { display: flex; gap: 1rem; list-style: none; margin: .3rem 0 0; padding: 0; font-size: .8rem; color: var(--muted); }
ul.legend .swatch { display: inline-block; width: .7rem; height: .7rem; border-radius: 2px; margin-right: .3rem; vertical-align: -1px; }
.swatch.c-ok { background: var(--ok); } .swatch.c-bad { background: var(--bad); } .swatch.c-undo { background: var(--undo); }
.swatch.c-warn { background: var(--warn); } .swatch.c-run { background: var(--run); } .swatch.c-wait { background: var(--wait); }
svg.run-timeline { width: 100%; height: auto; display: block; }
svg.run-timeline text { fill: var(--text); font-size: 11px; }
svg.run-timeline text.tick { fill: var(--muted); }
svg.run-timeline a text { fill: var(--accent); text-decoration: underline; }
svg.run-timeline a:focus-visible rect, svg.run-timeline a:focus rect { stroke: var(--focus); stroke-width: 3; }
svg .c-retry { fill: var(--bad); opacity: .45; }
svg .c-sleep, svg .c-signal { fill: var(--wait); opacity: .6; }
svg .c-child { fill: var(--accent); }
`;
