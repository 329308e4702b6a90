/**
 * What `ctx.log` costs per step (issue 29 point 2): without and with one `ctx.log.info` line per
 * step (inside the step, with metadata; the lines go out with the step's checkpoint), measured as
 * bench/paired-step-cost.ts says. Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/run-logs-cost.ts [--pairs 31]
 *
 * Figures in bench/README.md, "Run logs".
 */
import { runPairedStepCost } from './paired-step-cost';

runPairedStepCost({
  labels: ['no line', 'one ctx.log.info line per step'],
  what: 'one line per step',
  options: { logs: { maxPerTask: 10_000 } },
  step: (ctx, key, i, log) =>
    ctx.step.run(key, () => {
      if (log) ctx.log.info('step ran', { i });
      return i;
    }),
});
