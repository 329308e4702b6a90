import { Inject, Injectable, Logger, OnModuleInit, Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { loadDtoValidation } from '../dependencies/optional-dependencies';
import { RESOLVED_DURAFLOW_OPTIONS, WORKFLOW_NAME_PATTERN } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions, ResolvedStepOptions, resolveStepOptions } from '../config/resolved-options';
import {
  DuplicateCompensationError,
  DuplicateStepDefinitionError,
  DuraflowError,
  InvalidDuraflowOptionsError,
  InvalidWorkflowDefinitionError,
  UnknownCompensationTargetError,
} from '../domain/errors';
import { FunctionalWorkflowDefinition, WorkflowOptions } from '../domain/workflow-definition';
import { StepOptions, WorkflowContext } from '../domain/workflow-context';
import { UNKNOWN_INPUT_PROPERTIES } from '../domain/workflow-definition';
import { resolveFlowLimits } from '../validation/flow-limits';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';
import { RegisteredCompensation, RegisteredWorkflow, WorkflowRegistry } from './workflow.registry';
import { findWorkflowProviders } from './workflow-providers';

/**
 * Finds the @Workflow providers and the functional definitions at module init, checks them
 * and registers them; any mistake stops the boot with an error naming the culprit.
 */
@Injectable()
export class WorkflowExplorer implements OnModuleInit {
  private readonly logger = new Logger('Duraflow');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly metadata: WorkflowMetadataAccessor,
    private readonly registry: WorkflowRegistry,
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
  ) {}

  onModuleInit(): void {
    for (const { wrapper, metatype, meta } of findWorkflowProviders(this.discovery, this.metadata)) {
      this.registry.register(this.describeClass(wrapper, metatype, meta.name, meta.options));
    }
    for (const definition of this.options.workflows) {
      this.registry.register(this.describeFunctional(definition));
    }
    this.logger.log(`Registered workflows: ${this.registry.describe().join(', ') || 'none'}`);
  }

  private describeClass(wrapper: InstanceWrapper, metatype: Type, name: string, options: WorkflowOptions): RegisteredWorkflow {
    const source = `class ${metatype.name}`;
    this.checkName(name, source);
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
      throw new InvalidWorkflowDefinitionError(name, `${source} must be a singleton provider (not request-scoped or transient).`);
    }
    const instance = wrapper.instance as Record<string, unknown>;
    if (typeof instance?.run !== 'function') {
      throw new InvalidWorkflowDefinitionError(name, `${source} has no run(ctx) method: add one; it is the workflow's entry point.`);
    }
    const { step, compensation, input, version, flow } = this.resolveWorkflowOptions(name, source, options);

    const prototype = Object.getPrototypeOf(instance);
    const steps = new Map<string, string>();
    const compensationMethods: Array<{ method: string; stepKey: string; options?: StepOptions }> = [];
    for (const method of this.scanner.getAllMethodNames(prototype)) {
      const fn = prototype[method];
      const stepMeta = this.metadata.getStepMetadata(fn);
      if (stepMeta) {
        this.checkStepKey(name, stepMeta.key, `${metatype.name}.${method}`);
        const first = steps.get(stepMeta.key);
        if (first) {
          throw new DuplicateStepDefinitionError(name, stepMeta.key, `${metatype.name}.${first}`, `${metatype.name}.${method}`);
        }
        this.resolveStepOptionsOf(name, stepMeta.options, step, `@Step("${stepMeta.key}") on ${metatype.name}.${method}`);
        steps.set(stepMeta.key, method);
      }
      const compensated = this.metadata.getCompensateMetadata(fn);
      if (compensated !== undefined) compensationMethods.push({ method, stepKey: compensated.stepKey, options: compensated.options });
    }

    const compensations = new Map<string, RegisteredCompensation>();
    for (const { method, stepKey, options: compensateOptions } of compensationMethods) {
      const where = `@Compensate("${stepKey}") on ${metatype.name}.${method}`;
      if (!steps.has(stepKey)) throw new UnknownCompensationTargetError(name, stepKey, where, [...steps.keys()]);
      const first = compensations.get(stepKey);
      if (first) throw new DuplicateCompensationError(name, stepKey, first.name, `${name}.${method}`);
      const fn = instance[method] as (...args: unknown[]) => unknown;
      compensations.set(stepKey, {
        name: `${name}.${method}`,
        fn: (output, ctx) => fn.call(instance, output, ctx),
        options: this.resolveStepOptionsOf(name, compensateOptions, compensation, where),
      });
    }

    const run = instance.run as (ctx: WorkflowContext) => unknown;
    return {
      name,
      ...version,
      source,
      run: async (ctx) => run.call(instance, ctx),
      ...input,
      maxRetries: options.maxRetries,
      step,
      compensations,
      flow,
    };
  }

  private describeFunctional(definition: FunctionalWorkflowDefinition): RegisteredWorkflow {
    if (!definition || definition.kind !== 'functional-workflow') {
      throw new InvalidDuraflowOptionsError(
        'workflows',
        `must hold only definitions made by workflow(name, fn), got ${String(definition)}.`,
      );
    }
    const { name, options } = definition;
    const source = `workflow("${name}")`;
    this.checkName(name, source);
    if (typeof definition.run !== 'function') {
      throw new InvalidWorkflowDefinitionError(name, `the second argument of workflow("${name}", fn) must be a function.`);
    }
    const { step, compensation, input, version, flow } = this.resolveWorkflowOptions(name, source, options);
    const compensations = new Map<string, RegisteredCompensation>();
    for (const [stepKey, fn] of Object.entries(options.compensations ?? {})) {
      this.checkStepKey(name, stepKey, `${source} compensations`);
      if (typeof fn !== 'function') {
        throw new InvalidWorkflowDefinitionError(name, `compensations["${stepKey}"] must be a function of the step's output.`);
      }
      compensations.set(stepKey, { name: `${name}.compensations.${stepKey}`, fn, options: compensation });
    }
    return {
      name,
      ...version,
      source,
      run: async (ctx) => definition.run(ctx),
      ...input,
      maxRetries: options.maxRetries,
      step,
      compensations,
      flow,
    };
  }

  private resolveWorkflowOptions(name: string, source: string, options: WorkflowOptions) {
    if (options.input !== undefined && typeof options.input !== 'function') {
      throw new InvalidWorkflowDefinitionError(name, `${source}: "input" must be a class-validator DTO class.`);
    }
    if (options.maxRetries !== undefined && (!Number.isSafeInteger(options.maxRetries) || options.maxRetries < 0)) {
      throw new InvalidWorkflowDefinitionError(name, `${source}: "maxRetries" must be an integer >= 0.`);
    }
    if (
      options.version !== undefined &&
      (!Number.isSafeInteger(options.version) || options.version < 1 || options.version > 2_147_483_647)
    ) {
      throw new InvalidWorkflowDefinitionError(name, `${source}: "version" must be an integer from 1 to 2147483647.`);
    }
    const unknownInputProperties = options.unknownInputProperties ?? this.options.unknownInputProperties;
    if (!UNKNOWN_INPUT_PROPERTIES.includes(unknownInputProperties)) {
      throw new InvalidWorkflowDefinitionError(name, `${source}: "unknownInputProperties" must be 'strip' or 'reject'.`);
    }
    // A DTO without class-validator installed stops the boot, not the first submit.
    if (options.input) loadDtoValidation(name);
    return {
      step: this.resolveStepOptionsOf(name, options.step, this.options.step, `${source} step`),
      compensation: this.resolveStepOptionsOf(name, options.compensation, this.options.compensation, `${source} compensation`),
      input: { inputType: options.input as Type<object> | undefined, unknownInputProperties },
      version: { version: options.version ?? 1, declaredVersion: options.version },
      flow: resolveFlowLimits(name, source, options),
    };
  }

  /** Step options out of range are a mistake in this workflow's definition, not in the module options. */
  private resolveStepOptionsOf(name: string, options: StepOptions | undefined, base: ResolvedStepOptions, where: string) {
    try {
      return resolveStepOptions(options, base, where);
    } catch (error) {
      if (error instanceof DuraflowError) throw new InvalidWorkflowDefinitionError(name, error.message);
      throw error;
    }
  }

  private checkName(name: unknown, source: string): asserts name is string {
    if (typeof name !== 'string' || !WORKFLOW_NAME_PATTERN.test(name)) {
      throw new InvalidWorkflowDefinitionError(
        undefined,
        `${source} has the name ${JSON.stringify(name)}; use 1 to 255 letters, digits, "-" or "_".`,
      );
    }
  }

  private checkStepKey(workflowName: string, key: unknown, where: string): void {
    if (typeof key !== 'string' || key.length === 0 || key.length > 255) {
      throw new InvalidWorkflowDefinitionError(
        workflowName,
        `${where}: step key ${JSON.stringify(key)} must be a non-empty string of at most 255 characters.`,
      );
    }
  }
}
