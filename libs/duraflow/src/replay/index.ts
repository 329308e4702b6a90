// `@duraflow/nestjs/replay`: the replay check as a function (what `npx duraflow replay-check` runs).
export { replayCheck, exportRecordedRuns, ReplayCheckOptions, ReplayCheckReport, ReplayRunResult } from './replay-check';
export { ReplayOutcome } from './replay-run';
export { RecordedRun, RecordedStep, RecordedRunsFile } from './recorded-run';
export { RecordedRunsQuery } from './read-recorded-runs';
export { ReplayWorkflowSource } from './replay-workflows';
