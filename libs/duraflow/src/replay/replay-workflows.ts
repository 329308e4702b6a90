import type { DynamicModule, INestApplicationContext, Type } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../domain/duraflow.constants';
import type { WorkflowMetadata } from '../decorators/workflow.decorator';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { ReplayCheckInputError } from '../domain/errors';
import type { FunctionalWorkflowDefinition } from '../domain/workflow-definition';
import type { WorkflowContext } from '../domain/workflow-context';
import { duringReplayBoot } from './replay-boot';

/** Today's code of a workflow version, as the replay check calls it. */
export type ReplayableRun = (ctx: WorkflowContext) => Promise<unknown>;

/** Where the replay check finds today's code of a recorded run's workflow and version. */
export interface ReplayableWorkflows {
  /** Undefined when this code has no such workflow or version (the run is skipped, and reported). */
  find(workflowName: string, version: number): ReplayableRun | undefined;
  close(): Promise<void>;
}

/** What `replayCheck({ workflows })` takes: functional definitions and @Workflow classes. */
export type ReplayWorkflowSource = FunctionalWorkflowDefinition | Type;

/** A registry of a booted app (app.get(WorkflowRegistry)): its workflows with their DI. */
export function registryWorkflows(registry: WorkflowRegistry, close: () => Promise<void> = async () => undefined): ReplayableWorkflows {
  return {
    find(name, version) {
      if (!registry.versions(name).includes(version)) return undefined;
      return registry.get(name, version).run;
    },
    close,
  };
}

/**
 * Definitions without an app. A @Workflow class is constructed without its dependencies (with
 * no arguments, or without its constructor if that throws): a replay runs no step body, and
 * `run` itself should touch injected services only inside steps. For workflows whose `run` needs
 * them, pass the app's module instead.
 */
export function definitionWorkflows(sources: ReplayWorkflowSource[]): ReplayableWorkflows {
  const byKey = new Map<string, ReplayableRun>();
  for (const source of sources) {
    const { name, version, run } = describeSource(source);
    const key = `${name}@${version}`;
    if (byKey.has(key)) throw new ReplayCheckInputError(`workflow "${name}" version ${version} is given twice.`);
    byKey.set(key, run);
  }
  return { find: (name, version) => byKey.get(`${name}@${version}`), close: async () => undefined };
}

function describeSource(source: ReplayWorkflowSource): { name: string; version: number; run: ReplayableRun } {
  if (isFunctionalDefinition(source)) {
    return { name: source.name, version: source.options.version ?? 1, run: async (ctx) => source.run(ctx) };
  }
  const meta = typeof source === 'function' ? (Reflect.getMetadata(WORKFLOW_METADATA, source) as WorkflowMetadata | undefined) : undefined;
  if (!meta) throw new ReplayCheckInputError(`${describe(source)} is neither a workflow(name, fn) definition nor a @Workflow class.`);
  let instance: { run?: (ctx: WorkflowContext) => unknown };
  try {
    instance = new (source as new () => typeof instance)();
  } catch {
    instance = Object.create(source.prototype) as typeof instance;
  }
  if (typeof instance.run !== 'function') throw new ReplayCheckInputError(`class ${source.name} has no run(ctx) method.`);
  return { name: meta.name, version: meta.options.version ?? 1, run: async (ctx) => instance.run!(ctx) };
}

/** Every workflow a loaded file exports: definitions, @Workflow classes, arrays of them. */
export function workflowSourcesOf(exported: unknown): ReplayWorkflowSource[] {
  const values = Array.isArray(exported) ? exported : [exported];
  return values.flatMap((value): ReplayWorkflowSource[] => {
    if (Array.isArray(value)) return workflowSourcesOf(value);
    if (isFunctionalDefinition(value)) return [value];
    if (typeof value === 'function' && Reflect.getMetadata(WORKFLOW_METADATA, value)) return [value as Type];
    return [];
  });
}

/** A Nest module class, or a dynamic module (`{ module }`). */
export function isNestModule(value: unknown): value is Type | DynamicModule {
  if (typeof value === 'function')
    return ['imports', 'providers', 'controllers', 'exports'].some((key) => Reflect.hasOwnMetadata(key, value));
  return typeof value === 'object' && value !== null && typeof (value as DynamicModule).module === 'function';
}

/**
 * Boots the host's module as an application context in replay mode (its worker and reaper do
 * not start; replay-boot.ts) and replays with its registry: the workflows with their real DI.
 * The app's own connections (its TypeORM DataSource) are opened as its module says.
 */
export async function moduleWorkflows(module: Type | DynamicModule): Promise<ReplayableWorkflows> {
  const { NestFactory } = await import('@nestjs/core');
  const app: INestApplicationContext = await duringReplayBoot(() => NestFactory.createApplicationContext(module, { logger: ['error'] }));
  let registry: WorkflowRegistry;
  try {
    registry = app.get(WorkflowRegistry, { strict: false });
  } catch (error) {
    await app.close();
    throw new ReplayCheckInputError(`the module boots but has no DuraflowModule (${(error as Error).message}).`);
  }
  return registryWorkflows(registry, () => app.close());
}

function isFunctionalDefinition(value: unknown): value is FunctionalWorkflowDefinition {
  return typeof value === 'object' && value !== null && (value as FunctionalWorkflowDefinition).kind === 'functional-workflow';
}

function describe(value: unknown): string {
  return typeof value === 'function' ? `class ${value.name}` : (JSON.stringify(value) ?? String(value));
}
