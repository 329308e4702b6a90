import { StepBody, StepFaults, StepPoint } from '../execution/step-faults';

/** What `failStep` takes besides the error: how many attempts fail (default: every one). */
export interface FailStepOptions {
  times?: number;
}

interface Crash {
  workflow: string;
  step: string;
  when: 'before' | 'after';
}

interface Failure {
  error: unknown;
  left: number;
}

const pointKey = (workflow: string, step: string) => `${workflow}\u0000${step}`;

/**
 * The faults a test environment injects (execution/step-faults.ts is the seam): crashes, each
 * once, at a step's start or right after its checkpoint; failures of a step's attempts; stubs of
 * a step's body. `onCrash` hears of each crash (the environment recovers its claim).
 */
export class FaultPlan implements StepFaults {
  private readonly crashesPlanned: Crash[] = [];
  private readonly failures = new Map<string, Failure>();
  private readonly stubs = new Map<string, StepBody<unknown>>();

  constructor(private readonly onCrash: (at: StepPoint) => void) {}

  crash(workflow: string, step: string, when: 'before' | 'after'): void {
    this.crashesPlanned.push({ workflow, step, when });
  }

  fail(workflow: string, step: string, error: unknown, options: FailStepOptions = {}): void {
    const times = options.times ?? Infinity;
    if (!(times === Infinity || (Number.isInteger(times) && times >= 0))) {
      throw new TypeError(`failStep("${workflow}", "${step}"): times must be an integer >= 0, got ${String(options.times)}.`);
    }
    this.failures.set(pointKey(workflow, step), { error, left: times });
  }

  stub(workflow: string, step: string, fn: StepBody<unknown>): void {
    this.stubs.set(pointKey(workflow, step), fn);
  }

  /** Crashes planned and not yet reached. */
  get plannedCrashes(): number {
    return this.crashesPlanned.length;
  }

  clear(): void {
    this.crashesPlanned.length = 0;
    this.failures.clear();
    this.stubs.clear();
  }

  body<T>(at: StepPoint, fn: StepBody<T>): StepBody<T> {
    const key = pointKey(at.workflow, at.step);
    const body = (this.stubs.get(key) as StepBody<T> | undefined) ?? fn;
    if (!this.failures.has(key)) return body;
    return (step) => {
      const failure = this.failures.get(key);
      if (failure && failure.left > 0) {
        failure.left--;
        throw failure.error;
      }
      return body(step);
    };
  }

  crashes(at: StepPoint, when: 'before' | 'after'): boolean {
    const index = this.crashesPlanned.findIndex((crash) => crash.workflow === at.workflow && crash.step === at.step && crash.when === when);
    if (index < 0) return false;
    this.crashesPlanned.splice(index, 1);
    this.onCrash(at);
    return true;
  }
}
