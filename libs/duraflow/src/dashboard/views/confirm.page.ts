import { AgentTask, TaskError } from '../../domain/entities/agent-task.entity';
import { DeadLetter } from '../../domain/entities/dead-letter.entity';
import { StepSummary } from '../../domain/task-summaries';
import { DeadLetterAction } from '../dashboard-links';
import { timeElement } from './format';
import { html, Html } from './html';
import { layout, statusBadge, ViewContext } from './layout';

/**
 * The confirmation step of every action: a page that says what will happen, and a form that
 * POSTs it. Nothing changes until its button is pressed.
 */
export function confirmPage(
  context: ViewContext,
  page: { title: string; what: Html; action: string; button: string; back: string; backLabel: string },
): Html {
  return layout(context, {
    title: page.title,
    section: 'tasks',
    body: html`<div class="confirm">
<h1>${page.title}</h1>
<div class="panel">${page.what}</div>
<form method="post" action="${page.action}" class="actions">
  <button type="submit" class="danger">${page.button}</button>
  <a class="button secondary" href="${page.back}">${page.backLabel}</a>
</form>
</div>`,
  });
}

export function confirmCancelPage(context: ViewContext, task: AgentTask, steps: StepSummary[], compensate: boolean): Html {
  const { links } = context;
  const toUndo = steps.filter((step) => step.status === 'completed' && step.compensationFn && !step.compensatedAt);
  const what = compensate
    ? html`<p>Task <code>${task.id}</code> (<code>${task.workflowName}</code>, ${statusBadge(task.status)}) stops, and its completed steps are
  undone first, newest first: ${
    toUndo.length
      ? html`${toUndo.length} compensation${toUndo.length > 1 && 's'} (${toUndo.map((step, i) => html`${i > 0 && ', '}<code>${step.stepKey}</code>`)})`
      : 'none is left to undo'
  }.
  A compensation that fails for good goes to the dead-letter queue. The rollback runs in this server; the answer comes when it is over.</p>
<p>The task ends <strong>cancelled</strong>.</p>`
    : html`<p>Task <code>${task.id}</code> (<code>${task.workflowName}</code>, ${statusBadge(task.status)}) ends <strong>cancelled</strong>:
  a pending task never runs; a running one stops before its next step and its current step's signal is aborted.</p>
<p>Completed steps are <strong>not</strong> undone (use “Cancel and compensate” for that).</p>`;
  return confirmPage(context, {
    title: compensate ? 'Cancel and compensate this task?' : 'Cancel this task?',
    what,
    action: links.cancel(task.id, compensate),
    button: compensate ? 'Cancel and compensate' : 'Cancel the task',
    back: links.task(task.id),
    backLabel: 'Keep it running',
  });
}

export function confirmDeadLetterPage(
  context: ViewContext,
  task: AgentTask,
  entry: DeadLetter,
  step: StepSummary | undefined,
  action: DeadLetterAction,
): Html {
  const { links } = context;
  const stepName = html`<code>${step?.stepKey ?? entry.stepId}</code>`;
  const what =
    action === 'retry'
      ? html`<p>The compensation <code>${step?.compensationFn ?? '?'}</code> of step ${stepName} of task <code>${task.id}</code> runs once more, in this
  server, with the step's saved output.</p>
<p>If it succeeds the entry is resolved (and the task becomes <strong>rolled back</strong> when it was its last); if it fails the entry
  stays with the new error and one more retry counted (${entry.retryCount ?? 0} so far).</p>`
      : html`<p>The entry for step ${stepName} of task <code>${task.id}</code> is removed <strong>without running its compensation</strong>.
  Do this only when the effect was undone by hand: the step's compensation stays unrecorded.</p>
<p>When it is the task's last entry, the task becomes <strong>rolled back</strong>.</p>`;
  return confirmPage(context, {
    title: action === 'retry' ? 'Retry this compensation?' : 'Discard this dead letter?',
    what,
    action: links.deadLetter(task.id, entry.id, action),
    button: action === 'retry' ? 'Retry the compensation' : 'Discard the entry',
    back: links.task(task.id),
    backLabel: 'Back to the task',
  });
}

/**
 * Resuming a task the determinism guard holds: what it does, and the divergence that held it
 * (the NonDeterminismError's recorded and requested steps, as `task.error` keeps them).
 */
export function confirmResumePage(context: ViewContext, task: AgentTask): Html {
  const { links } = context;
  const error = (task.error ?? {}) as Partial<TaskError>;
  const requested =
    error.requestedStep === null
      ? html`<span class="muted">none: the run returned without asking for the recorded step</span>`
      : error.requestedStep !== undefined
        ? html`<code>${error.requestedStep}</code>`
        : html`<span class="muted">not recorded</span>`;
  const what = html`<p>Task <code>${task.id}</code> (<code>${task.workflowName}</code> <span class="muted">v${task.workflowVersion ?? 1}</span>) is held by the
  determinism guard since ${timeElement(task.heldAt)}: on recovery its code took another path than the one the run recorded.</p>
<dl class="facts" aria-label="The divergence">
  <div><dt>Recorded step not asked for</dt><dd>${error.recordedStep !== undefined ? html`<code>${error.recordedStep}</code>` : html`<span class="muted">not recorded</span>`}</dd></div>
  <div><dt>Step the code asked for instead</dt><dd>${requested}</dd></div>
</dl>
${error.message && html`<p class="muted">${error.message}</p>`}
<p>Resume clears the hold and this error and wakes the workers: the task <strong>runs again on the code deployed now</strong>, replaying its
  recorded steps (their saved outputs, nothing run twice) and going on from there. Resume only once a deploy that takes the recorded path is
  out (<code>ctx.patched(id)</code> around the change, or new runs on a new workflow version).</p>
<p>If the code deployed now still takes another path, the task is <strong>held again</strong>, with nothing run and nothing undone.</p>`;
  return confirmPage(context, {
    title: 'Resume this held task?',
    what,
    action: links.resume(task.id),
    button: 'Resume the task',
    back: links.task(task.id),
    backLabel: 'Keep it held',
  });
}

/** The form that sends a signal: its name and its payload as JSON, posted to the same address. */
export function signalFormPage(
  context: ViewContext,
  task: AgentTask,
  problem?: string,
  values: { name?: string; payload?: string } = {},
): Html {
  const { links } = context;
  return layout(context, {
    title: 'Send a signal',
    section: 'tasks',
    body: html`<div class="confirm">
<h1>Send a signal to task <code>${task.id}</code></h1>
${problem && html`<p class="notice" role="alert">${problem}</p>`}
<div class="panel"><p>The signal is kept until the task's <code>ctx.waitForSignal(name)</code> takes it (one per wait, in the order they were sent);
  a task waiting for that name resumes at once.</p></div>
<form method="post" action="${links.signal(task.id)}">
  <p><label>Name <input name="name" required maxlength="200" pattern="[A-Za-z0-9_.:\\-]{1,200}" value="${values.name ?? ''}"></label></p>
  <p><label>Payload (JSON; empty for none)<br><textarea name="payload" rows="6" cols="60">${values.payload ?? ''}</textarea></label></p>
  <div class="actions">
    <button type="submit">Send the signal</button>
    <a class="button secondary" href="${links.task(task.id)}">Back to the task</a>
  </div>
</form>
</div>`,
  });
}
