/**
 * What the step option `recordStart` costs per step (issue 29 point 3): without and with
 * `recordStart: true` (one fenced write of the step's `running` row before its body), measured
 * as bench/paired-step-cost.ts says. Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/record-start-cost.ts [--pairs 31]
 *
 * Figures in bench/README.md, "recordStart".
 */
import { runPairedStepCost } from './paired-step-cost';

runPairedStepCost({
  labels: ['without recordStart', 'with recordStart: true'],
  what: 'recordStart',
  step: (ctx, key, i, recordStart) => ctx.step.run(key, () => i, { recordStart }),
});
