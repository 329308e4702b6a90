/**
 * What encryption at rest costs per step (issue 29 point 5): the same runs without and with
 * aesGcmCodec (AES-256-GCM: each step's output sealed on its checkpoint, the input and the
 * output of the run too), measured as bench/paired-step-cost.ts says. The two halves of a pair
 * run on one app: the codec is switched on for the runs "with" it only (a value it did not seal
 * reads as it is). Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/codec-cost.ts [--pairs 31]
 *
 * Figures in bench/README.md, "Encryption at rest".
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { aesGcmCodec, PayloadCodec } from '@duraflow/nestjs';
import { runPairedStepCost } from './paired-step-cost';

const aes = aesGcmCodec({ keys: { bench: randomBytes(32) }, current: 'bench' });
let sealing = false;
/** aesGcmCodec while `sealing`, the identity otherwise (decode opens what was sealed, and passes plaintext through). */
const switchable: PayloadCodec = {
  name: aes.name,
  encode: (value, context) => (sealing ? aes.encode(value, context) : value),
  decode: (stored, context) => aes.decode(stored, context),
};

/** The codec alone, no database: sealing and opening one step output, in microseconds (p50 of 20 rounds of 2,000). */
function sealAndOpenMicros(): number {
  const value = { i: 1, customer: 'cus_4f9a1c', amount: 4_200, currency: 'eur', note: 'paid by card' };
  const context = { taskId: randomUUID(), field: 'step_output' as const };
  const rounds: number[] = [];
  for (let round = 0; round < 20; round++) {
    const started = performance.now();
    for (let i = 0; i < 2_000; i++) aes.decode(aes.encode(value, context), context);
    rounds.push(((performance.now() - started) * 1_000) / 2_000);
  }
  return rounds.sort((a, b) => a - b)[10];
}
console.log(`aesGcmCodec alone: seal + open of one ~100-byte step output: ${sealAndOpenMicros().toFixed(1)} µs (p50 of 20 rounds)\n`);

runPairedStepCost({
  labels: ['no codec', 'aesGcmCodec'],
  what: 'the codec',
  options: { codec: switchable },
  beforeRun: (withIt) => {
    sealing = withIt;
  },
  // A step output of about 100 bytes of JSON, as a small real one.
  step: (ctx, key, i) => ctx.step.run(key, () => ({ i, customer: 'cus_4f9a1c', amount: 4_200, currency: 'eur', note: 'paid by card' })),
});
