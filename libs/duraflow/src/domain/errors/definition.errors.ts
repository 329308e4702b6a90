import { DuraflowError } from './duraflow.error';

/** Boot-time: two workflows (classes or functional definitions) claim one name. */
export class DuplicateWorkflowError extends DuraflowError {
  readonly code = 'DUPLICATE_WORKFLOW';
  constructor(
    readonly workflowName: string,
    first: string,
    second: string,
    readonly version = 1,
  ) {
    super(
      `Workflow "${workflowName}"${version === 1 ? '' : ` version ${version}`} is defined twice (${first} and ${second}). ` +
        `A workflow name (and version) must be unique in the application: rename one of them, or give each its own { version } ` +
        `(a workflow that declares no version is version 1).`,
    );
  }
}

/** Boot-time: one workflow class declares the same @Step key on two methods. */
export class DuplicateStepDefinitionError extends DuraflowError {
  readonly code = 'DUPLICATE_STEP_DEFINITION';
  constructor(
    readonly workflowName: string,
    readonly stepKey: string,
    first: string,
    second: string,
  ) {
    super(
      `Workflow "${workflowName}" declares step "${stepKey}" on both ${first} and ${second}. ` +
        `Step keys must be unique within a workflow: give one of the methods another key.`,
    );
  }
}

/** Boot-time: a @Compensate (or a functional compensation) names a step the workflow does not declare. */
export class UnknownCompensationTargetError extends DuraflowError {
  readonly code = 'UNKNOWN_COMPENSATION_TARGET';
  constructor(
    readonly workflowName: string,
    readonly stepKey: string,
    where: string,
    known: string[],
  ) {
    super(
      `${where} compensates step "${stepKey}", which workflow "${workflowName}" does not declare ` +
        `(declared steps: ${known.length ? known.map((k) => `"${k}"`).join(', ') : 'none'}). ` +
        `Fix the step key, or declare the step with @Step("${stepKey}").`,
    );
  }
}

/** Boot-time: a step has two compensations. */
export class DuplicateCompensationError extends DuraflowError {
  readonly code = 'DUPLICATE_COMPENSATION';
  constructor(
    readonly workflowName: string,
    readonly stepKey: string,
    first: string,
    second: string,
  ) {
    super(`Workflow "${workflowName}" has two compensations for step "${stepKey}" (${first} and ${second}). ` + `Keep one.`);
  }
}

/** Boot-time: a workflow definition is malformed (bad name, no run method, bad options, not a singleton). */
export class InvalidWorkflowDefinitionError extends DuraflowError {
  readonly code = 'INVALID_WORKFLOW_DEFINITION';
  constructor(
    readonly workflowName: string | undefined,
    reason: string,
  ) {
    super(`Invalid workflow definition${workflowName ? ` "${workflowName}"` : ''}: ${reason}`);
  }
}

/** Boot-time: the module options are out of range. */
export class InvalidDuraflowOptionsError extends DuraflowError {
  readonly code = 'INVALID_OPTIONS';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`DuraflowModule option "${option}" ${reason}`);
  }
}
